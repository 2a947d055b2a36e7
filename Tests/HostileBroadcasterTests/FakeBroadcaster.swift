import Foundation
import PartyCastCodec
import PartyCastTestSupport
import PartyCastWire

func envelope(_ body: PCEnvelope.OneOf_Body) -> PCEnvelope {
    var envelope = PCEnvelope()
    envelope.body = body
    return envelope
}

struct FakeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The good audio every scenario sends: a 997 Hz sine at 0.5, 48 kHz stereo, 960-frame (20 ms)
/// chunks. 997 Hz does not divide a chunk, so every chunk differs and one lost, repeated or
/// reordered shows in the recording.
final class ToneStream: Sendable {
    enum Codec: String, Sendable { case pcm, opus }
    static let rate = 48000, channels = 2, framesPerChunk = 960
    static let chunkNanoseconds: Int64 = 20_000_000
    static let toneRMS = 0.5 / 2.0.squareRoot()

    static let pcm = try! ToneStream(codec: .pcm)
    static let opus = try! ToneStream(codec: .opus)
    /// 4 s: more than the listener's 2 s ring holds, so its producer waits for playback.
    static let longPCM = try! ToneStream(codec: .pcm, chunkCount: 200)

    let codec: Codec
    let chunkCount: Int
    /// The source, interleaved.
    let samples: [Float]
    let payloads: [[UInt8]]
    let preSkip: Int

    init(codec: Codec, chunkCount: Int = 100) throws {
        self.codec = codec
        self.chunkCount = chunkCount
        let perChunk = Self.framesPerChunk * Self.channels
        let samples = (0..<chunkCount * perChunk).map { i in
            Float(0.5 * sin(2 * Double.pi * 997 * Double(i / ToneStream.channels) / Double(ToneStream.rate)))
        }
        self.samples = samples
        let encoder: any AudioEncoder = codec == .opus
            ? try OpusEncoder(channels: Self.channels, bitrateKbps: 128)
            : PCMEncoder(format: .init(sampleRate: Self.rate, channels: Self.channels))
        payloads = try (0..<chunkCount).map { k in
            try samples[k * perChunk..<(k + 1) * perChunk].withUnsafeBufferPointer { try encoder.encode($0) }
        }
        preSkip = encoder.preSkip
    }

    var format: PCStreamFormat {
        var format = PCStreamFormat()
        format.codec = codec == .opus ? .opus : .pcmF32Le
        format.sampleRate = UInt32(Self.rate)
        format.channels = UInt32(Self.channels)
        format.framesPerChunk = UInt32(Self.framesPerChunk)
        format.preSkip = UInt32(preSkip)
        format.totalFrames = UInt64(chunkCount * Self.framesPerChunk)
        return format
    }

    /// Chunk `k` as the timeline starting at `origin` (chunk 0's presentation time) places it.
    func chunk(_ k: Int, origin: Int64) -> PCAudioChunk {
        var chunk = PCAudioChunk()
        chunk.sequence = UInt64(k)
        chunk.mediaPosition = UInt64(k * Self.framesPerChunk)
        chunk.presentationNanoseconds = origin + Int64(k) * Self.chunkNanoseconds
        chunk.frameCount = UInt32(Self.framesPerChunk)
        chunk.payload = Data(payloads[k])
        return chunk
    }
}

/// A broadcaster that speaks the wire protocol only as far as a test script tells it to, on
/// 127.0.0.1. Each accepted connection runs `script` on a thread of its own while a reader thread
/// records what the listener sends and answers its clock requests. Scripts note what they find
/// wrong with `problem`; the test reads `problems` once the listener has exited.
final class FakeBroadcaster: @unchecked Sendable {
    // @unchecked: the mutable state below is only touched under `state`.
    typealias Script = @Sendable (FakeConnection) throws -> Void
    typealias ClockAnswer = @Sendable (PCClockRequest) -> [PCClockResponse]

    /// t1 echoed, t2 = t3 = now: on one machine both ends share CLOCK_MONOTONIC, so sync is exact.
    static let honestClock: ClockAnswer = { request in
        var response = PCClockResponse()
        response.t1 = request.t1
        response.t2 = monotonicNow()
        response.t3 = response.t2
        return [response]
    }

    let port: Int
    let stream: ToneStream
    let sessionID: UInt64 = 0x9A27_CA57
    let clockAnswer: ClockAnswer
    /// Goodbye only once the last chunk is due, as the real broadcaster does, so that a real-time
    /// listener still has its clock exchanges answered while it plays; otherwise at once.
    let paced: Bool
    private let listening: Int32
    private let script: Script
    private let state = NSCondition()
    private var connections: [FakeConnection] = []
    private var origin: Int64?
    private var lastScriptSend: Int64?
    private var recordedProblems: [String] = []
    private var stopped = false
    private let running = DispatchGroup()

    init(stream: ToneStream, paced: Bool, clockAnswer: @escaping ClockAnswer = FakeBroadcaster.honestClock, script: @escaping Script) throws {
        guard let (fd, port) = boundLoopbackSocket(), listen(fd, 64) == 0 else { throw FakeError("cannot listen on 127.0.0.1") }
        listening = fd
        self.port = port
        self.stream = stream
        self.clockAnswer = clockAnswer
        self.paced = paced
        self.script = script
        running.enter()
        Thread.detachNewThread { self.acceptLoop(); self.running.leave() }
    }

    /// Chunk 0's presentation time, fixed at the first connection (+1.5 s, so every chunk is still
    /// ahead of its time when it arrives) and kept for reconnections: one timeline per broadcast.
    var timelineOrigin: Int64 { state.withLock { origin ?? 0 } }
    /// When a script last sent something (clock answers excluded): the listener's deadlines count from it.
    var lastSentAt: Int64? { state.withLock { lastScriptSend } }
    var problems: [String] { state.withLock { recordedProblems } }
    var acceptedConnections: [FakeConnection] { state.withLock { connections } }

    func problem(_ text: String) { state.withLock { recordedProblems.append(text) } }
    func noteSend() { state.withLock { lastScriptSend = monotonicNow() } }

    /// Stops accepting, cuts every connection and waits (bounded) for the threads to end. Idempotent.
    func stop() {
        let first = state.withLock { defer { stopped = true }; return !stopped }
        guard first else { return }
        shutdown(listening, Int32(SHUT_RDWR))  // ends the accept loop, which closes it
        for connection in acceptedConnections { connection.cut() }
        if running.wait(timeout: .now() + 10) == .timedOut { problem("the fake's threads did not end within 10 s of stop") }
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listening, nil, nil)
            if fd < 0 && errno == EINTR { continue }
            guard fd >= 0 else { close(listening); return }
            let connection = state.withLock {
                if origin == nil { origin = monotonicNow() + 1_500_000_000 }
                let connection = FakeConnection(index: connections.count, fd: fd, fake: self, origin: origin!)
                connections.append(connection)
                return connection
            }
            running.enter()
            Thread.detachNewThread { connection.run(self.script); self.running.leave() }
        }
    }
}

/// One accepted connection, as the script sees it.
final class FakeConnection: @unchecked Sendable {
    // @unchecked: mutable state is only touched under `state`; writes to `fd` are serialized by `writing`.
    /// 0 for the first connection, 1 for the listener's first reconnection, … (messages count from 1)
    let index: Int
    let origin: Int64
    unowned let fake: FakeBroadcaster
    var stream: ToneStream { fake.stream }
    private let fd: Int32
    private let writing = NSLock()
    private let state = NSCondition()
    private var first: PCEnvelope?
    /// The latency offset and channel of each Status the listener sent, in order.
    private var reported: [(offset: Int32, channel: PCChannelAssignment)] = []
    private var hello: PCHello?
    private var readerDone = false
    private var clockAnswered = false
    private var closed = false
    /// Set once the script sent what must end the connection: send errors are then expected.
    private var expectingClose = false

    init(index: Int, fd: Int32, fake: FakeBroadcaster, origin: Int64) {
        self.index = index
        self.fd = fd
        self.fake = fake
        self.origin = origin
    }

    /// The listener's first message on this connection (nil if it sent none).
    var firstMessage: PCEnvelope? { state.withLock { first } }

    fileprivate func run(_ script: FakeBroadcaster.Script) {
        let reader = DispatchSemaphore(value: 0)
        Thread.detachNewThread { self.readLoop(); reader.signal() }
        do { try script(self) } catch {
            if !state.withLock({ expectingClose }) { fake.problem("connection \(index + 1): \(error)") }
        }
        shutdown(fd, Int32(SHUT_RDWR))
        reader.wait()  // ends at once: the shutdown makes its read return 0
        state.withLock { closed = true }
        close(fd)
    }

    /// Cuts the connection now (the fake is stopping); its threads then end on their own.
    fileprivate func cut() { state.withLock { if !closed { shutdown(fd, Int32(SHUT_RDWR)) } } }

    // MARK: What the listener sends

    private func readLoop() {
        var decoder = WireFrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            decoder.push(buffer[0..<count])
            do {
                while let message = try decoder.next() { received(message) }
            } catch {
                fake.problem("connection \(index + 1): the listener sent bad framing (\(error))")
                break
            }
        }
        state.withLock { readerDone = true; state.broadcast() }
    }

    private func received(_ message: PCEnvelope) {
        state.withLock {
            if first == nil { first = message }
            if case .status(let status)? = message.body { reported.append((status.latencyOffsetMilliseconds, status.channel)) }
            if case .hello(let h)? = message.body, hello == nil { hello = h }
            state.broadcast()
        }
        // Whatever a newer listener may add is ignored, as a broadcaster would.
        if case .clockRequest(let request)? = message.body {
            for response in fake.clockAnswer(request) { try? write(WireFraming.encode(envelope(.clockResponse(response)))) }
            state.withLock { clockAnswered = true; state.broadcast() }
        }
    }

    /// Waits until a clock request has been answered, so what the script sends next cannot stand
    /// between the listener and its first clock answer.
    func waitForClockAnswer(timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        try state.withLock {
            while !clockAnswered && !readerDone && state.wait(until: deadline) {}
            guard clockAnswered else { throw FakeError("no clock request answered within \(timeout) s") }
        }
    }

    /// Waits (up to `timeout` s) for a Status reporting this latency offset; whether one came.
    func waitForReport(offset milliseconds: Int32, channel: PCChannelAssignment, timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        let matches = { (report: (offset: Int32, channel: PCChannelAssignment)) in report.offset == milliseconds && report.channel == channel }
        return state.withLock {
            while !reported.contains(where: matches) && !readerDone && state.wait(until: deadline) {}
            return reported.contains(where: matches)
        }
    }

    /// Waits for the listener's Hello (which should be its first message; the test checks that).
    func waitForHello(timeout: Double = 10) throws -> PCHello {
        let deadline = Date().addingTimeInterval(timeout)
        return try state.withLock {
            while hello == nil && !readerDone && state.wait(until: deadline) {}
            guard let hello else { throw FakeError("no Hello within \(timeout) s") }
            return hello
        }
    }

    /// Whether the listener closed its end within `timeout` s.
    func waitForListenerClose(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        return state.withLock {
            while !readerDone && state.wait(until: deadline) {}
            return readerDone
        }
    }

    // MARK: What the fake sends

    /// Writes all of `bytes` or throws: MSG_NOSIGNAL so a listener that closed costs an error, not
    /// SIGPIPE; bounded so a listener that stopped reading cannot hang the test.
    private func write(_ bytes: [UInt8]) throws {
        try writing.withLock {
            let deadline = monotonicNow() + 20_000_000_000
            var offset = 0
            while offset < bytes.count {
                guard monotonicNow() < deadline else { throw FakeError("the listener read nothing for 20 s") }
                var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&ready, 1, 100) > 0 else { continue }
                let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                if sent < 0 {
                    if errno == EAGAIN || errno == EINTR { continue }
                    throw FakeError("the listener closed the connection (\(String(cString: strerror(errno))))")
                }
                offset += sent
            }
        }
    }

    func send(raw bytes: [UInt8]) throws {
        try write(bytes)
        fake.noteSend()
    }

    func send(_ bodies: PCEnvelope.OneOf_Body...) throws {
        for body in bodies { try send(raw: WireFraming.encode(envelope(body))) }
    }

    func welcome(version: UInt32 = partyCastProtocolVersion, _ edit: (inout PCWelcome) -> Void = { _ in }) throws {
        var welcome = PCWelcome()
        welcome.protocolVersion = version
        welcome.sessionID = fake.sessionID
        welcome.broadcasterName = "fake"
        welcome.broadcasterID = "fake-broadcaster"
        edit(&welcome)
        try send(.welcome(welcome))
    }

    func streamFormat(_ edit: (inout PCStreamFormat) -> Void = { _ in }) throws {
        var format = stream.format
        edit(&format)
        try send(.streamFormat(format))
    }

    func metadata(_ edit: (inout PCMetadata) -> Void = { _ in }) throws {
        var metadata = PCMetadata()
        metadata.title = "Tone"
        metadata.artist = "PartyCast tests"
        metadata.durationFrames = UInt64(stream.chunkCount * ToneStream.framesPerChunk)
        edit(&metadata)
        try send(.metadata(metadata))
    }

    /// Waits for the Hello, then Welcome, StreamFormat, Metadata.
    func handshake() throws {
        _ = try waitForHello()
        try welcome()
        try streamFormat()
        try metadata()
    }

    func chunks(_ range: Range<Int>) throws {
        for k in range { try send(.audioChunk(stream.chunk(k, origin: origin))) }
    }

    func chunk(_ k: Int, _ edit: (inout PCAudioChunk) -> Void) throws {
        var chunk = stream.chunk(k, origin: origin)
        edit(&chunk)
        try send(.audioChunk(chunk))
    }

    /// When paced, waits until the last chunk is due (or the listener has gone).
    func waitForTimelineEnd() {
        guard fake.paced else { return }
        let end = origin + Int64(stream.chunkCount) * ToneStream.chunkNanoseconds
        _ = waitForListenerClose(timeout: Double(max(0, end - monotonicNow())) / 1e9)
    }

    /// Goodbye, then the fake closes its end as the real broadcaster does, and waits for the
    /// listener to close its own.
    func finish(reason: String = "the broadcast is over") throws {
        waitForTimelineEnd()
        var goodbye = PCGoodbye()
        goodbye.reason = reason
        try send(.goodbye(goodbye))
        shutdown(fd, Int32(SHUT_WR))
        _ = waitForListenerClose(timeout: 30)
    }

    /// Handshake, every chunk, Goodbye: what a reconnection gets. Chunks the listener already
    /// played come again; it must drop them.
    func serveAll() throws {
        try handshake()
        try chunks(0..<stream.chunkCount)
        try finish()
    }

    /// Sends what must end the connection (errors are expected from here on: the listener may
    /// close at any point), then checks that the listener closes it within 5 s.
    func violate(_ what: String, _ send: () throws -> Void) {
        state.withLock { expectingClose = true }
        try? send()
        if !waitForListenerClose(timeout: 5) { fake.problem("connection \(index + 1): the listener kept the connection open 5 s after \(what)") }
    }
}
