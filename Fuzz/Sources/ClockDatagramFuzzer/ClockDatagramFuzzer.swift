import FuzzDriver
import PartyCastClock
import PartyCastCore
@testable import PartyCastClockExchange
import PartyCastWire

/// Feeds arbitrary datagrams to both ends of the UDP clock channel, as anyone on the LAN can: the
/// responder must answer only a live session's request (never an answer, never another token) and
/// the listener must believe only the answer to a request in flight, once, and within ClockSync's
/// bounds; neither may crash or trap on any bytes.
/// One key handshake's clock key, made once (CPace per input would be all the fuzzer did).
let privateKey: ClockDatagramKey? = {
    let listener = KeyHandshake.Initiator(key: PartyKey(secret: "fuzz"))
    return KeyHandshake.Responder(key: PartyKey(secret: "fuzz"), sessionID: listener.sessionID, listenerShare: listener.share)?.session.clockKey
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = ArraySlice(UnsafeBufferPointer(start: data, count: size))
    let token: UInt64 = 0x5EED
    // A public party's session and a private one's: the sealed path must open nothing it should not.
    for key in [nil, privateKey] {
        let rate = TokenBucket(burst: ClockResponder.burst, perSecond: ClockResponder.requestsPerSecond, now: 0)
        var sessions = [token: ClockResponder.Session(key: key, rate: rate)]
        if let answer = ClockResponder.admitted(bytes, at: 1_000, sessions: &sessions) {
            precondition(answer.datagram.answer && answer.datagram.token == token, "answered what is not a live session's request")
        }
    }

    let datagrams = ClockRequester.Datagrams(host: "127.0.0.1", port: 9, token: token, key: nil)
    let sync = ClockSync(clock: .system)
    var exchange = Exchange(datagrams: datagrams, sync: sync)
    // Requests in flight for the sequences an input is likely to name.
    for _ in 0..<4 { _ = exchange.nextRequest(datagrams) }
    if let sample = exchange.accept(bytes, arrivedAt: Int64.max / 2) {
        sync.record(sample)
        precondition(exchange.accept(bytes, arrivedAt: Int64.max / 2) == nil, "the same answer was believed twice")
    }
    return 0
}

@_cdecl("ClockDatagramFuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv) { fuzzOneInput($0, $1) }
}
