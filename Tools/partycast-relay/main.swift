// A man in the middle for the LAN tests of the party key handshake (Tests/LANTests/PrivatePartyOnLANTests):
//
//   partycast-relay capture LISTEN_PORT TARGET_HOST:PORT CAPTURE_FILE SESSIONS [--timeout S]
//       accepts SESSIONS connections, one after another (each is relayed as soon as it is accepted),
//       forwards every byte both ways to the target unchanged, and appends to CAPTURE_FILE one line
//       per complete framed message:           SESSION<TAB>l2b|b2l<TAB>KIND<TAB>HEX_OF_THE_WHOLE_FRAME
//       and, after a key handshake message, one line per share, session id or confirmation in it:
//                                              SESSION<TAB>DIR<TAB>KIND.FIELD<TAB>HEX
//       (Hello.key_session_id, Hello.listener_share, KeyChallenge.broadcaster_share,
//       KeyChallenge.broadcaster_confirmation, KeyProof.listener_confirmation). After the KeyChallenge
//       (b2l) and the KeyProof (l2b) the stream is sealed records, one line each, of KIND "Sealed".
//       Sessions count from 1. Exits 0 once every session has ended.
//   partycast-relay replay-to-broadcaster CAPTURE_FILE SESSION TARGET_HOST:PORT [--timeout S]
//       connects to the broadcaster, sends the session's first captured l2b frame (its Hello), and
//       after the first answer the rest of them (KeyProof…); exits 0 when the broadcaster closes.
//   partycast-relay replay-to-listener CAPTURE_FILE SESSION LISTEN_PORT [--timeout S]
//       accepts one listener, reads its Hello, then sends the session's captured b2l frames
//       (KeyChallenge, Welcome, StreamFormat, chunks…); exits 0 when the listener closes.
//
// Replays print each message they receive on stdout, one a line: KIND, or for an error
// "Error<TAB>CODE<TAB>MESSAGE". Progress goes to stderr. Every mode ends by itself: a watchdog exits
// with status 3 after the timeout (capture 120 s, replays 10 s and 20 s by default); 1 is a usage or
// I/O error.
import Foundation
import PartyCastCore
import PartyCastWire
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// MARK: Output and failure

func say(_ line: String, to fd: Int32 = STDOUT_FILENO) {
    let bytes = Array((line + "\n").utf8)
    _ = writeAll(fd, bytes[...])
}

func note(_ line: String) { say("partycast-relay: \(line)", to: STDERR_FILENO) }

func fail(_ why: String) -> Never {
    note(why)
    exit(1)
}

/// Writes all of `bytes`; false when the peer is gone (or the write timed out).
@discardableResult
func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}

// MARK: Messages

func kind(_ envelope: PCEnvelope) -> String {
    switch envelope.body {
    case .hello: "Hello"
    case .welcome: "Welcome"
    case .streamFormat: "StreamFormat"
    case .audioChunk: "AudioChunk"
    case .metadata: "Metadata"
    case .endOfStream: "EndOfStream"
    case .goodbye: "Goodbye"
    case .error: "Error"
    case .clockRequest: "ClockRequest"
    case .clockResponse: "ClockResponse"
    case .status: "Status"
    case .keyChallenge: "KeyChallenge"
    case .keyProof: "KeyProof"
    case .withdraw: "Withdraw"
    case .gain: "Gain"
    case .partyState: "PartyState"
    case .listenerSettings: "ListenerSettings"
    case .identify: "Identify"
    case nil: "Unknown"
    }
}

let errorCodeNames = ["ERROR_UNSPECIFIED", "PROTOCOL_VERSION_MISMATCH", "MESSAGE_TOO_LARGE", "MALFORMED", "TIMEOUT",
                      "QUEUE_OVERFLOW", "KEY_REQUIRED", "KEY_REJECTED"]

/// What a replay prints for a message it received.
func describe(_ envelope: PCEnvelope) -> String {
    guard case .error(let error)? = envelope.body else { return kind(envelope) }
    let code = errorCodeNames.indices.contains(error.code.rawValue) ? errorCodeNames[error.code.rawValue] : "CODE_\(error.code.rawValue)"
    return "Error\t\(code)\t\(String(untrusted: error.message, limit: 200))"
}

/// The shares, session id and confirmations of a key handshake message.
func keyFields(_ envelope: PCEnvelope) -> [(String, [UInt8])] {
    switch envelope.body {
    case .hello(let hello) where hello.holdsKey: [("Hello.key_session_id", [UInt8](hello.keySessionID)),
                                                  ("Hello.listener_share", [UInt8](hello.listenerShare))]
    case .keyChallenge(let challenge): [("KeyChallenge.broadcaster_share", [UInt8](challenge.broadcasterShare)),
                                        ("KeyChallenge.broadcaster_confirmation", [UInt8](challenge.broadcasterConfirmation))]
    case .keyProof(let proof): [("KeyProof.listener_confirmation", [UInt8](proof.listenerConfirmation))]
    default: []
    }
}

let hexDigits = Array("0123456789abcdef".utf8)

func hex(_ bytes: some Collection<UInt8>) -> String {
    var out = [UInt8](repeating: 0, count: bytes.count * 2)
    out.withUnsafeMutableBufferPointer { out in
        for (i, byte) in bytes.enumerated() {
            out[2 * i] = hexDigits[Int(byte >> 4)]
            out[2 * i + 1] = hexDigits[Int(byte & 15)]
        }
    }
    return String(decoding: out, as: UTF8.self)
}

func unhex(_ text: Substring.UTF8View) -> [UInt8]? {
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 97...102: c - 87
        case 65...70: c - 55
        default: nil
        }
    }
    guard text.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.count / 2)
    var high: UInt8?
    for c in text {
        guard let n = nibble(c) else { return nil }
        if let h = high { bytes.append(h << 4 | n); high = nil } else { high = n }
    }
    return bytes
}

/// Splits a byte stream into whole frames (prefix included) and their envelopes, however it arrives.
/// With `sealsAfterHandshake`, the frames after a KeyChallenge or KeyProof are sealed records, split
/// by their length alone, with no envelope.
struct FrameSplitter {
    let sealsAfterHandshake: Bool
    private var sealed = false
    private var decoder = WireFrameDecoder()
    /// The same bytes as the decoder holds, so each message's frame can be handed out verbatim.
    private var raw: [UInt8] = []
    private var head = 0

    mutating func push(_ bytes: ArraySlice<UInt8>) -> [(frame: ArraySlice<UInt8>, envelope: PCEnvelope?)] {
        if head > 0 && head * 2 >= raw.count {
            raw.removeFirst(head)
            head = 0
        }
        if !sealed { decoder.push(bytes) }
        raw.append(contentsOf: bytes)
        var messages: [(ArraySlice<UInt8>, PCEnvelope?)] = []
        do {
            while !sealed, let envelope = try decoder.next() {
                let size = decoder.lastMessageBytes
                messages.append((raw[head..<head + size], envelope))
                head += size
                switch envelope.body {
                case .keyChallenge?, .keyProof?: sealed = sealsAfterHandshake
                default: break
                }
            }
            while sealed, raw.count - head >= 4 {
                let length = Int(raw[head..<head + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                guard length <= SessionRecords.maxPlaintextBytes + 16 else { throw WireError.unsealable("a record of \(length) bytes") }
                guard raw.count - head - 4 >= length else { break }
                messages.append((raw[head..<head + 4 + length], nil))
                head += 4 + length
            }
        } catch {
            raw = []
            head = 0
            failure = "\(error)"
        }
        return messages
    }

    init(sealsAfterHandshake: Bool = false) { self.sealsAfterHandshake = sealsAfterHandshake }

    /// Set once the stream stopped being PartyCast frames (nothing more is split).
    private(set) var failure: String?
}

// MARK: Sockets

func parseEndpoint(_ text: String) -> sockaddr_in {
    let parts = text.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]), port > 0 else { fail("expected HOST:PORT, not \"\(text)\"") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    guard inet_pton(AF_INET, String(parts[0]), &address.sin_addr) == 1 else { fail("expected an IPv4 address, not \"\(parts[0])\"") }
    return address
}

func parsePort(_ text: String) -> UInt16 {
    guard let port = UInt16(text), port > 0 else { fail("expected a port, not \"\(text)\"") }
    return port
}

/// Reads and writes on `fd` give up after `seconds` (connect too), so nothing blocks for ever.
func setTimeouts(_ fd: Int32, seconds: Int) {
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
}

func listenOn(_ port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { fail("socket: \(String(cString: strerror(errno)))") }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = INADDR_ANY
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, listen(fd, 8) == 0 else { fail("cannot listen on port \(port): \(String(cString: strerror(errno)))") }
    note("listening on \(port)")
    return fd
}

/// The next connection and the peer's address (the watchdog bounds the wait).
func acceptOne(_ listener: Int32) -> (Int32, String) {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    while true {
        let fd = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
        }
        if fd >= 0 {
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
            let printable = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return (fd, String(decoding: printable, as: UTF8.self) + ":\(UInt16(bigEndian: address.sin_port))")
        }
        if errno != EINTR { fail("accept: \(String(cString: strerror(errno)))") }
    }
}

func connectTo(_ address: sockaddr_in) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    setTimeouts(fd, seconds: 10)
    var address = address
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { close(fd); return nil }
    var yes: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
    return fd
}

/// One read; nil at end of stream or on an error (a reset, a timeout).
func readSome(_ fd: Int32, _ buffer: inout [UInt8]) -> ArraySlice<UInt8>? {
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n > 0 { return buffer[0..<n] }
        if n < 0 && errno == EINTR { continue }
        return nil
    }
}

// MARK: Capture

/// Lines appended to the capture file whole, under one lock.
final class CaptureFile: Sendable {
    private let fd: Int32
    private let lock = Mutex(())

    init(path: String) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fail("cannot open \(path): \(String(cString: strerror(errno)))") }
    }

    func append(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        let bytes = Array(lines.joined(separator: "\n").utf8) + [10]
        lock.withLock { _ in _ = writeAll(fd, bytes[...]) }
    }
}

/// Forwards `from` → `to` until either side is done, recording each frame.
func pump(from: Int32, to: Int32, session: Int, direction: String, capture: CaptureFile) {
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var splitter = FrameSplitter(sealsAfterHandshake: true)
    var frames = 0
    while let bytes = readSome(from, &buffer) {
        guard writeAll(to, bytes) else { break }
        guard splitter.failure == nil else { continue }
        var lines: [String] = []
        for (frame, envelope) in splitter.push(bytes) {
            lines.append("\(session)\t\(direction)\t\(envelope.map(kind) ?? "Sealed")\t\(hex(frame))")
            for (field, value) in envelope.map(keyFields) ?? [] { lines.append("\(session)\t\(direction)\t\(field)\t\(hex(value))") }
            frames += 1
        }
        capture.append(lines)
        if let failure = splitter.failure { note("session \(session) \(direction): not PartyCast frames any more (\(failure)); forwarding only") }
    }
    // End of stream: pass it on (half close); anything else ends both directions.
    shutdown(to, Int32(SHUT_WR))
    shutdown(from, Int32(SHUT_RD))
    note("session \(session) \(direction): \(frames) frames")
}

/// Which of a session's two directions have ended: the second one closes both sockets.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

func capture(listenPort: UInt16, target: sockaddr_in, path: String, sessions: Int) -> Int32 {
    let capture = CaptureFile(path: path)
    let listener = listenOn(listenPort)
    var threads: [DedicatedThread] = []
    var failed = false
    for session in 1...sessions {
        let (client, peer) = acceptOne(listener)
        guard let server = connectTo(target) else {
            note("session \(session) from \(peer): cannot connect to the target: \(String(cString: strerror(errno)))")
            close(client)
            failed = true
            continue
        }
        note("session \(session): \(peer) relayed")
        // Only a long silence ends a session by timeout; the watchdog bounds the whole run.
        setTimeouts(client, seconds: 60)
        setTimeouts(server, seconds: 60)
        let done = Counter()
        for (from, to, direction) in [(client, server, "l2b"), (server, client, "b2l")] {
            threads.append(DedicatedThread {
                pump(from: from, to: to, session: session, direction: direction, capture: capture)
                if done.value.add(1, ordering: .acquiringAndReleasing).newValue == 2 {
                    close(client)
                    close(server)
                    note("session \(session) ended")
                }
            })
        }
    }
    close(listener)
    threads.forEach { $0.join() }
    return failed ? 1 : 0
}

// MARK: Replay

/// The captured frames of one session in one direction, in order. The file is read whole, so it is
/// refused beyond 256 MiB.
func capturedFrames(_ path: String, session: Int, direction: String) -> [[UInt8]] {
    var info = stat()
    guard stat(path, &info) == 0 else { fail("cannot read \(path): \(String(cString: strerror(errno)))") }
    guard info.st_size <= 256 << 20 else { fail("\(path) is larger than 256 MiB") }
    guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    let text = String(decoding: data, as: UTF8.self)
    var frames: [[UInt8]] = []
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0] == "\(session)", fields[1] == direction, !fields[2].contains(".") else { continue }
        guard let frame = unhex(fields[3].utf8) else { fail("\(path): a line that is not hex: \(line.prefix(80))") }
        frames.append(frame)
    }
    guard !frames.isEmpty else { fail("\(path) holds no \(direction) frames of session \(session)") }
    return frames
}

/// Reads messages from `fd` and prints each until the peer closes (true) or the read fails (false);
/// `first` runs after the first message.
func printMessages(_ fd: Int32, first: () -> Void = {}) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var splitter = FrameSplitter()
    var seen = 0
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n == 0 { return true }
        if n < 0 {
            // A reset after the peer closed is still the peer closing; a timeout is not.
            let error = errno
            note("read: \(String(cString: strerror(error)))")
            return error == ECONNRESET || error == EPIPE
        }
        for case (_, let envelope?) in splitter.push(buffer[0..<n]) {
            say(describe(envelope))
            seen += 1
            if seen == 1 { first() }
        }
        if let failure = splitter.failure { note("the peer sent bad data (\(failure))") }
    }
}

func replayToBroadcaster(frames: [[UInt8]], target: sockaddr_in, seconds: Int) -> Int32 {
    guard let fd = connectTo(target) else { fail("cannot connect to the broadcaster: \(String(cString: strerror(errno)))") }
    setTimeouts(fd, seconds: seconds)
    writeAll(fd, frames[0][...])
    note("sent the Hello (\(frames[0].count) bytes)")
    let closed = printMessages(fd) {
        // One write, so the broadcaster reads all of it before it can close on us.
        let rest = frames.dropFirst().flatMap { $0 }
        let sent = writeAll(fd, rest[...])
        note("sent the \(frames.count - 1) other frames (\(rest.count) bytes)\(sent ? "" : ": the broadcaster had closed")")
    }
    note(closed ? "the broadcaster closed the connection" : "no end from the broadcaster")
    close(fd)
    return closed ? 0 : 3
}

func replayToListener(frames: [[UInt8]], port: UInt16, seconds: Int) -> Int32 {
    let listener = listenOn(port)
    let (fd, peer) = acceptOne(listener)
    close(listener)
    note("listener \(peer) connected")
    setTimeouts(fd, seconds: seconds)
    var writer: DedicatedThread?
    let closed = printMessages(fd) {
        // The Hello came: send the old session's frames from another thread while reading the answers.
        writer = DedicatedThread {
            var sent = 0
            for frame in frames {
                guard writeAll(fd, frame[...]) else { break }
                sent += 1
            }
            note("sent \(sent) of \(frames.count) frames")
        }
    }
    shutdown(fd, Int32(SHUT_RDWR))  // unblocks the writer
    writer?.join()
    close(fd)
    note(closed ? "the listener closed the connection" : "no end from the listener")
    return closed ? 0 : 3
}

// MARK: Main

signal(SIGPIPE, SIG_IGN)
var arguments = Array(CommandLine.arguments.dropFirst())
var timeout: Int?
if arguments.count >= 2, arguments[arguments.count - 2] == "--timeout" {
    guard let seconds = Int(arguments[arguments.count - 1]), (1...3600).contains(seconds) else { fail("--timeout takes 1…3600 seconds") }
    timeout = seconds
    arguments.removeLast(2)
}

/// Exits with status 3 after `seconds`, whatever the mode is waiting for.
func watchdog(_ seconds: Int) {
    _ = DedicatedThread {
        sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + UInt64(seconds) * 1_000_000_000)
        note("timed out after \(seconds) s")
        _exit(3)
    }
}

let usage = """
    usage: partycast-relay capture LISTEN_PORT TARGET_HOST:PORT CAPTURE_FILE SESSIONS [--timeout S]
           partycast-relay replay-to-broadcaster CAPTURE_FILE SESSION TARGET_HOST:PORT [--timeout S]
           partycast-relay replay-to-listener CAPTURE_FILE SESSION LISTEN_PORT [--timeout S]
    """

switch (arguments.first, arguments.count) {
case ("capture", 5):
    guard let sessions = Int(arguments[4]), (1...100).contains(sessions) else { fail("SESSIONS must be 1…100") }
    watchdog(timeout ?? 120)
    exit(capture(listenPort: parsePort(arguments[1]), target: parseEndpoint(arguments[2]), path: arguments[3], sessions: sessions))
case ("replay-to-broadcaster", 4):
    guard let session = Int(arguments[2]) else { fail("SESSION must be a number") }
    let seconds = timeout ?? 10
    watchdog(seconds)
    exit(replayToBroadcaster(frames: capturedFrames(arguments[1], session: session, direction: "l2b"),
                             target: parseEndpoint(arguments[3]), seconds: seconds))
case ("replay-to-listener", 4):
    guard let session = Int(arguments[2]) else { fail("SESSION must be a number") }
    let seconds = timeout ?? 20
    watchdog(seconds)
    exit(replayToListener(frames: capturedFrames(arguments[1], session: session, direction: "b2l"),
                          port: parsePort(arguments[3]), seconds: seconds))
default:
    say(usage, to: STDERR_FILENO)
    exit(1)
}
