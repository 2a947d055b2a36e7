import Foundation
import Glibc
import PartyCastWire
import PartyCastSources
import XCTest

/// What a decoder made of a byte stream: the messages, then the error that ended it, if any.
struct Outcome: Equatable {
    var messages: [PCEnvelope] = []
    var error: WireError?
}

/// Pushes `bytes` in pieces of the sizes `pieceSize` returns (0 included), draining after each.
func decode(_ bytes: [UInt8], pieceSize: () -> Int) -> Outcome {
    var decoder = WireFrameDecoder()
    var outcome = Outcome()
    var i = 0
    repeat {
        let n = min(pieceSize(), bytes.count - i)
        decoder.push(bytes[i..<i + n])
        i += n
        do throws(WireError) {
            while let envelope = try decoder.next() { outcome.messages.append(envelope) }
        } catch {
            outcome.error = error
            return outcome
        }
    } while i < bytes.count
    return outcome
}

/// Runs `body` with this process's address space capped at what is mapped now plus `headroom`, so
/// any larger allocation in it fails (and the test process crashes) instead of quietly succeeding.
func withAddressSpaceCap(headroom: Int, _ body: () throws -> Void) throws {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmSize:") })
    let mapped = try XCTUnwrap(Int(line.dropFirst("VmSize:".count).dropLast(" kB".count).trimmingCharacters(in: .whitespaces))) * 1024
    var saved = rlimit()
    XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &saved), 0)
    var capped = saved
    capped.rlim_cur = rlim_t(mapped + headroom)
    XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &capped), 0)
    defer { setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &saved) }
    try body()
}

func envelope(_ body: PCEnvelope.OneOf_Body) -> PCEnvelope {
    var envelope = PCEnvelope()
    envelope.body = body
    return envelope
}

func prefix(_ length: UInt32) -> [UInt8] {
    [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
}

final class WireFramingTests: XCTestCase {
    /// One of each message, every field away from its default so a dropped field would show.
    func everyMessage() -> [PCEnvelope] {
        var hello = PCHello()
        hello.protocolVersion = 1; hello.listenerName = "kitchen ♫"; hello.hostName = "pi-kitchen"; hello.listenerID = "L-1"; hello.wantsSync = true
        var welcome = PCWelcome()
        welcome.protocolVersion = 1; welcome.broadcasterName = "Party"; welcome.broadcasterID = "B-7"; welcome.sessionID = .max
        var format = PCStreamFormat()
        format.codec = .opus; format.sampleRate = 48000; format.channels = 2; format.framesPerChunk = 960; format.preSkip = 312
        format.streamIndex = 3; format.totalFrames = 10_000_000_000
        var chunk = PCAudioChunk()
        chunk.sequence = 1 << 40; chunk.mediaPosition = 6720; chunk.presentationNanoseconds = -123_456_789; chunk.frameCount = 960
        chunk.streamIndex = 3; chunk.payload = Data((0..<300).map { UInt8($0 % 251) })
        var metadata = PCMetadata()
        metadata.title = "Song"; metadata.artist = "Band"; metadata.album = "Album"; metadata.durationFrames = 960_000; metadata.streamIndex = 3
        var end = PCEndOfStream()
        end.streamIndex = 3; end.reason = "finished"
        var goodbye = PCGoodbye()
        goodbye.reason = "the broadcast is over"
        var error = PCError()
        error.code = .queueOverflow; error.message = "too slow"
        var request = PCClockRequest()
        request.listenerID = "L-1"; request.t1 = 1_000_000_001
        var response = PCClockResponse()
        response.t1 = 1_000_000_001; response.t2 = 2_000_000_002; response.t3 = 2_000_000_003
        var status = PCStatus()
        status.bufferMilliseconds = 480; status.syncErrorMicroseconds = -12; status.underruns = 2; status.playedPosition = 48000
        status.clockBoundMicroseconds = 37
        var challenge = PCKeyChallenge()
        challenge.broadcasterShare = Data(repeating: 7, count: 32); challenge.broadcasterConfirmation = Data(repeating: 9, count: 64)
        var proof = PCKeyProof()
        proof.listenerConfirmation = Data(repeating: 5, count: 64)
        metadata.startPosition = 1 << 40; metadata.songFrame = 4800
        status.latencyOffsetMilliseconds = -250
        var withdraw = PCWithdraw()
        withdraw.fromPosition = 1 << 47
        var gain = PCGain()
        gain.atPosition = 96_000; gain.gain = 0.25; gain.rampFrames = 480
        var party = PCPartyState()
        party.paused = true
        var settings = PCListenerSettings()
        settings.latencyOffsetMilliseconds = -2000
        var identify = PCIdentify()
        identify.atPosition = 144_000
        return [.hello(hello), .welcome(welcome), .streamFormat(format), .audioChunk(chunk), .metadata(metadata), .endOfStream(end),
                .goodbye(goodbye), .error(error), .clockRequest(request), .clockResponse(response), .status(status),
                .keyChallenge(challenge), .keyProof(proof), .withdraw(withdraw), .gain(gain), .partyState(party),
                .listenerSettings(settings), .identify(identify)].map(envelope)
    }

    /// Exhaustive, so a message added to the proto fails to compile here until `everyMessage` has it.
    func kind(_ body: PCEnvelope.OneOf_Body) -> String {
        switch body {
        case .hello: "hello"
        case .welcome: "welcome"
        case .streamFormat: "streamFormat"
        case .audioChunk: "audioChunk"
        case .metadata: "metadata"
        case .endOfStream: "endOfStream"
        case .goodbye: "goodbye"
        case .error: "error"
        case .clockRequest: "clockRequest"
        case .clockResponse: "clockResponse"
        case .status: "status"
        case .keyChallenge: "keyChallenge"
        case .keyProof: "keyProof"
        case .withdraw: "withdraw"
        case .gain: "gain"
        case .partyState: "partyState"
        case .listenerSettings: "listenerSettings"
        case .identify: "identify"
        }
    }

    /// Messages of random kinds and sizes, audio chunks up to 64 KiB.
    func randomMessages(_ count: Int, using rng: inout SplitMix64) -> [PCEnvelope] {
        let samples = everyMessage()
        return (0..<count).map { _ in
            var message = samples.randomElement(using: &rng)!
            if case .audioChunk(var chunk) = message.body {
                chunk.sequence = rng.next()
                chunk.payload = Data((0..<Int.random(in: 1...65536, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                message.body = .audioChunk(chunk)
            }
            return message
        }
    }

    func testEveryMessageTypeRoundTrips() throws {
        let messages = everyMessage()
        XCTAssertEqual(Set(messages.map { kind($0.body!) }).count, 18, "one of each kind")
        for message in messages {
            let frame = try WireFraming.encode(message)
            let body: [UInt8] = try message.serializedBytes()
            XCTAssertEqual(Array(frame.prefix(4)), prefix(UInt32(body.count)), "big-endian length of \(kind(message.body!))")
            XCTAssertEqual(Array(frame.dropFirst(4)), body)
            var decoder = WireFrameDecoder()
            decoder.push(frame)
            XCTAssertEqual(try decoder.next(), message)
            XCTAssertNil(try decoder.next(), "nothing more after one frame")
        }
    }

    func testAnySplitGivesTheSameMessages() throws {
        var rng = SplitMix64(seed: 2024)
        let messages = randomMessages(300, using: &rng)
        let stream = try messages.flatMap { try WireFraming.encode($0) }
        XCTAssertEqual(decode(stream) { stream.count }, Outcome(messages: messages))
        XCTAssertEqual(decode(stream) { 1 }, Outcome(messages: messages))
        for seed: UInt64 in 1...12 {
            var pieces = SplitMix64(seed: seed)
            // Mostly tiny pieces (0 to 8 bytes, which split prefixes), sometimes large ones.
            let outcome = decode(stream) {
                Bool.random(using: &pieces) ? Int.random(in: 0...8, using: &pieces) : Int.random(in: 0...100_000, using: &pieces)
            }
            XCTAssertEqual(outcome, Outcome(messages: messages), "split seed \(seed)")
        }
    }

    /// The largest message passes both ways; one byte more is refused by the encoder and the decoder.
    func testLimitIsExact() throws {
        var chunk = PCAudioChunk()
        chunk.payload = Data(count: WireFraming.maxMessageBytes - 16)
        while try (envelope(.audioChunk(chunk)).serializedBytes() as [UInt8]).count < WireFraming.maxMessageBytes { chunk.payload.append(7) }
        let largest = envelope(.audioChunk(chunk))
        let frame = try WireFraming.encode(largest)
        XCTAssertEqual(frame.count, WireFraming.maxMessageBytes + 4)
        XCTAssertEqual(decode(frame) { 4096 }, Outcome(messages: [largest]))

        chunk.payload.append(7)
        XCTAssertThrowsError(try WireFraming.encode(envelope(.audioChunk(chunk)))) {
            XCTAssertEqual($0 as? WireError, .messageTooLarge(claimed: UInt32(WireFraming.maxMessageBytes + 1)))
        }
        let overLimit = UInt32(WireFraming.maxMessageBytes + 1)
        XCTAssertEqual(decode(prefix(overLimit)) { 4 }, Outcome(error: .messageTooLarge(claimed: overLimit)))
    }

    /// A 4 GiB length is refused from its four bytes alone: no body is awaited, and nothing is
    /// allocated for it, not even briefly (under the cap, reserving it would crash).
    func testHugeLengthIsRefusedBeforeAllocating() throws {
        var decoder = WireFrameDecoder()
        decoder.push(prefix(0xFFFF_FFFF))
        try withAddressSpaceCap(headroom: 1 << 30) {
            XCTAssertThrowsError(try decoder.next()) { XCTAssertEqual($0 as? WireError, .messageTooLarge(claimed: 0xFFFF_FFFF)) }
        }
    }

    func testZeroLength() {
        XCTAssertEqual(decode(prefix(0) + [0x3A, 0x00]) { 1 }, Outcome(error: .zeroLength))
        XCTAssertThrowsError(try WireFraming.encode(PCEnvelope()), "a frame the decoder would refuse") {
            XCTAssertEqual($0 as? WireError, .zeroLength)
        }
    }

    /// Messages before a bad frame still come out; after it the decoder stays failed.
    func testFailureIsTerminal() throws {
        let good = everyMessage()
        let stream = try good.flatMap { try WireFraming.encode($0) } + prefix(3) + [0xFF, 0xFF, 0xFF] + WireFraming.encode(good[0])
        var decoder = WireFrameDecoder()
        decoder.push(stream)
        for message in good { XCTAssertEqual(try decoder.next(), message) }
        XCTAssertThrowsError(try decoder.next()) { error in
            guard case .malformed = error as? WireError else { return XCTFail("\(error)") }
        }
        decoder.push(try WireFraming.encode(good[1]))
        XCTAssertThrowsError(try decoder.next(), "still failed")
    }

    /// Random bytes, bare or behind a plausible length so they reach the protobuf decoder, end in
    /// a typed error or wait for more, never crash, and give the same outcome however they are split.
    func testGarbageFailsCleanly() {
        var rng = SplitMix64(seed: 0xBAD)
        var malformed = 0, tooLarge = 0
        for round in 0..<4000 {
            var bytes = (0..<Int.random(in: 0...120, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if round % 2 == 0 && !bytes.isEmpty { bytes = prefix(UInt32(bytes.count)) + bytes }
            let whole = decode(bytes) { bytes.count }
            var pieces = SplitMix64(seed: UInt64(round))
            XCTAssertEqual(decode(bytes) { Int.random(in: 0...5, using: &pieces) }, whole, "round \(round)")
            switch whole.error {
            case .malformed?: malformed += 1
            case .messageTooLarge?, .overBudget?: tooLarge += 1
            case .zeroLength?, nil: break
            case .unsealable?: XCTFail("no records to open here")
            }
        }
        XCTAssertGreaterThan(malformed, 1500, "bodies that are not protobuf are reported as malformed")
        XCTAssertGreaterThan(tooLarge, 1500, "random lengths are mostly far over the limit")
    }

    func testProtocolMismatchSaysWhatToUpgrade() {
        XCTAssertNil(protocolMismatch(peerVersion: partyCastProtocolVersion, peerRole: "listener"))
        XCTAssertNil(protocolMismatch(peerVersion: partyCastProtocolVersion, peerRole: "broadcaster"))
        let newer = partyCastProtocolVersion + 1
        guard case .error(let error)? = protocolMismatch(peerVersion: newer, peerRole: "listener")?.body else { return XCTFail("no error") }
        XCTAssertEqual(error.code, .protocolVersionMismatch)
        XCTAssertEqual(error.message, "the listener speaks PartyCast protocol \(newer), this broadcaster speaks \(partyCastProtocolVersion): upgrade the broadcaster")
        guard case .error(let older)? = protocolMismatch(peerVersion: 0, peerRole: "listener")?.body else { return XCTFail("no error") }
        XCTAssertTrue(older.message.hasSuffix("upgrade the listener"), older.message)
        guard case .error(let fromBroadcaster)? = protocolMismatch(peerVersion: newer, peerRole: "broadcaster")?.body else { return XCTFail("no error") }
        XCTAssertTrue(fromBroadcaster.message.hasSuffix("upgrade the listener"), fromBroadcaster.message)
    }
}
