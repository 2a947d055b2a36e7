import Foundation
@testable import PartyCastNetwork
import PartyCastCodec
import PartyCastClock
import PartyCastCore
import PartyCastWire
import Synchronization
import XCTest

/// The listener's checks on what a broadcaster says, driven message by message without a network.
final class ListenerValidationTests: XCTestCase {
    // MARK: The connection gate

    func gate(key: PartyKey? = nil) -> ConnectionGate {
        ConnectionGate(listenerName: "room", hostName: "pi", listenerID: "1", wantsSync: true, key: key)
    }

    /// The broadcaster's side of the gate's key handshake, with `key`.
    func responder(to gate: ConnectionGate, key: PartyKey) throws -> KeyHandshake.Responder {
        guard case .hello(let hello)? = gate.hello.body else { throw PartyCastError(.io, "no Hello") }
        return try XCTUnwrap(KeyHandshake.Responder(key: key, sessionID: [UInt8](hello.keySessionID), listenerShare: [UInt8](hello.listenerShare)))
    }

    func challenge(_ responder: KeyHandshake.Responder) -> PCEnvelope {
        var challenge = PCKeyChallenge()
        challenge.broadcasterShare = Data(responder.share)
        challenge.broadcasterConfirmation = Data(responder.confirmation)
        return envelope(.keyChallenge(challenge))
    }

    func envelope(_ body: PCEnvelope.OneOf_Body) -> PCEnvelope {
        var envelope = PCEnvelope()
        envelope.body = body
        return envelope
    }

    func welcome(version: UInt32 = partyCastProtocolVersion, session: UInt64 = 7) -> PCEnvelope {
        var welcome = PCWelcome()
        welcome.protocolVersion = version
        welcome.sessionID = session
        welcome.broadcasterName = "Party\u{1B}[2J"
        return envelope(.welcome(welcome))
    }

    func testNothingCountsBeforeTheWelcome() {
        for early in [envelope(.audioChunk(PCAudioChunk())), envelope(.streamFormat(PCStreamFormat())), envelope(.metadata(PCMetadata())),
                      envelope(.goodbye(PCGoodbye()))] {
            var gate = gate()
            guard case .close(let why)? = gate.handle(early, arrivedAt: 0).first else { return XCTFail("\(early) accepted before Welcome") }
            XCTAssertTrue(why.contains("before its Welcome"), why)
            XCTAssertEqual(gate.handle(welcome(), arrivedAt: 0), [], "a gate that closed stays closed")
        }
        var gate = gate()
        XCTAssertEqual(gate.handle(envelope(.clockResponse(PCClockResponse())), arrivedAt: 0), [], "an answer to nothing is ignored")
        XCTAssertEqual(gate.handle(welcome(), arrivedAt: 0), [.deliver(welcome())])
        XCTAssertTrue(gate.isJoined)
        XCTAssertEqual(gate.handle(envelope(.goodbye(PCGoodbye())), arrivedAt: 0).last, .close("it said goodbye"))
    }

    func testAnotherProtocolVersionIsFinal() {
        var gate = gate()
        guard case .fail(let error)? = gate.handle(welcome(version: 99), arrivedAt: 0).first else { return XCTFail() }
        XCTAssertEqual(error.code, .incompatible)
        XCTAssertEqual(error.code.exitStatus, 11)
    }

    func testKeyHandshakeBothWays() throws {
        let key = PartyKey(secret: "party time")
        var gate = gate(key: key)
        XCTAssertTrue(gate.hello.hello.holdsKey)
        XCTAssertEqual(gate.hello.hello.keySessionID.count, KeyHandshake.sessionIDBytes)
        XCTAssertEqual(gate.hello.hello.listenerShare.count, CPace.pointBytes)
        let broadcaster = try responder(to: gate, key: key)
        let verdicts = gate.handle(challenge(broadcaster), arrivedAt: 0)
        guard verdicts.count == 2, case .reply(let reply) = verdicts[0], case .keyProof(let proof)? = reply.body,
              case .startSealing(let session) = verdicts[1] else { return XCTFail("no key proof, then sealing: \(verdicts)") }
        XCTAssertTrue(broadcaster.verify(listenerConfirmation: proof.listenerConfirmation))
        XCTAssertEqual(session, broadcaster.session, "both ends seal under the same keys")
        XCTAssertNotNil(gate.clockKey)
        XCTAssertEqual(gate.handle(welcome(), arrivedAt: 0), [.deliver(welcome())])
    }

    func testAListenerWithAKeyRefusesWhatCannotProveIt() throws {
        let key = PartyKey(secret: "party time")
        // A public broadcaster (or an impostor) welcomes without proving anything.
        var unproven = gate(key: key)
        XCTAssertEqual(unproven.handle(welcome(), arrivedAt: 0).last.flatMap(failureCode), .key)
        // An answer to another listener's Hello: a replayed handshake.
        var replayed = gate(key: key)
        let verdicts = replayed.handle(challenge(try responder(to: gate(key: key), key: key)), arrivedAt: 0)
        XCTAssertEqual(verdicts.last.flatMap(failureCode), .key)
        XCTAssertFalse(verdicts.contains { if case .reply(let e) = $0, case .keyProof? = e.body { true } else { false } }, "never proves itself to an impostor")
        // A broadcaster with another key.
        var wrong = gate(key: key)
        let wrongVerdicts = wrong.handle(challenge(try responder(to: wrong, key: PartyKey(secret: "party tim"))), arrivedAt: 0)
        XCTAssertEqual(wrongVerdicts.last.flatMap(failureCode), .key)
        XCTAssertFalse(wrongVerdicts.contains { if case .startSealing = $0 { true } else { false } })
        // No key, and the party is private.
        var keyless = gate()
        XCTAssertEqual(keyless.handle(PCEnvelope.failure(.keyRequired, "private"), arrivedAt: 0).last.flatMap(failureCode), .key)
    }

    func failureCode(_ verdict: ConnectionGate.Verdict) -> PartyCastError.Code? {
        if case .fail(let error) = verdict { error.code } else { nil }
    }

    // MARK: The stream receiver

    let rate = 48000, channels = 2, frames = 960

    func receiver() -> StreamReceiver { StreamReceiver(clockSync: ClockSync(clock: .system)) }

    func pcmFormat() -> PCEnvelope {
        var format = PCStreamFormat()
        format.codec = .pcmF32Le
        format.sampleRate = UInt32(rate)
        format.channels = UInt32(channels)
        format.framesPerChunk = UInt32(frames)
        return envelope(.streamFormat(format))
    }

    /// Chunk `k` of a PCM stream whose samples all equal `k`, on a timeline starting at `origin`.
    func pcmChunk(_ k: Int, origin: Int64 = 5_000_000_000) -> PCAudioChunk {
        var chunk = PCAudioChunk()
        chunk.sequence = UInt64(k)
        chunk.mediaPosition = UInt64(k * frames)
        chunk.presentationNanoseconds = origin + Int64(k) * 20_000_000
        chunk.frameCount = UInt32(frames)
        chunk.payload = Data([Float](repeating: Float(k), count: frames * channels).withUnsafeBytes { Array($0) })
        return chunk
    }

    /// Feeds messages and returns what was played, as the value of each frame.
    func play(_ messages: [PCEnvelope], into receiver: inout StreamReceiver, arrivedAt: Int64 = 0) -> [Float] {
        var pcm: [Float] = []
        for message in messages { XCTAssertEqual(receiver.receive(message, arrivedAt: arrivedAt, into: &pcm), .continues) }
        return stride(from: 0, to: pcm.count, by: channels).map { pcm[$0] }
    }

    func testFormatsOutsideWhatACodecCarriesAreRefused() {
        func announce(_ change: (inout PCStreamFormat) -> Void) -> StreamReceiver.Outcome {
            var format = pcmFormat().streamFormat
            change(&format)
            var receiver = receiver()
            var pcm: [Float] = []
            return receiver.receive(envelope(.streamFormat(format)), arrivedAt: 0, into: &pcm)
        }
        XCTAssertEqual(announce { _ in }, .continues)
        let unplayable: [(String, (inout PCStreamFormat) -> Void)] = [
            ("0 Hz", { $0.sampleRate = 0 }), ("a million channels", { $0.channels = 1_000_000 }),
            ("no frames per chunk", { $0.framesPerChunk = 0 }), ("UInt32.max frames", { $0.framesPerChunk = .max }),
            ("UInt32.max pre-skip", { $0.preSkip = .max }), ("Opus at 44.1 kHz", { $0.codec = .opus; $0.sampleRate = 44100 }),
            ("Opus in 7-frame packets", { $0.codec = .opus; $0.framesPerChunk = 7 }), ("no codec", { $0.codec = .codecUnspecified }),
            ("S16 (no decoder)", { $0.codec = .pcmS16Le }), ("an unknown codec", { $0.codec = .UNRECOGNIZED(77) }),
        ]
        for (name, change) in unplayable {
            guard case .violation = announce(change) else { return XCTFail("\(name) accepted") }
        }
    }

    func testAbsurdChunksAreDroppedAndTheGoodOnesAroundThemPlay() {
        var receiver = receiver()
        var absurd: [PCAudioChunk] = []
        var beyond = pcmChunk(2); beyond.mediaPosition = UInt64(Int.max) + 1; absurd.append(beyond)
        var early = pcmChunk(2); early.presentationNanoseconds = Int64.min + 5; absurd.append(early)
        var late = pcmChunk(2); late.presentationNanoseconds = Int64.max; absurd.append(late)
        var empty = pcmChunk(2); empty.frameCount = 0; absurd.append(empty)
        var oversized = pcmChunk(2); oversized.frameCount = .max; absurd.append(oversized)
        // Consistent with its own position but an hour from where the stream stands.
        var farAhead = pcmChunk(2 + 180_000); farAhead.sequence = .max; absurd.append(farAhead)
        let played = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0))), envelope(.audioChunk(pcmChunk(1)))]
                          + absurd.map { envelope(.audioChunk($0)) }
                          + [envelope(.audioChunk(pcmChunk(2))), envelope(.audioChunk(pcmChunk(3)))], into: &receiver)
        XCTAssertEqual(played, (0..<4).flatMap { [Float](repeating: Float($0), count: frames) })
        XCTAssertEqual(receiver.droppedChunks, absurd.count)
        XCTAssertEqual(receiver.concealedChunks, 0)
    }

    func testUndecodablePayloadsAreConcealedForTheirFrames() {
        var receiver = receiver()
        var short = pcmChunk(1); short.payload = Data([1, 2, 3])
        var none = pcmChunk(2); none.payload = Data()
        let played = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0))), envelope(.audioChunk(short)),
                           envelope(.audioChunk(none)), envelope(.audioChunk(pcmChunk(3)))], into: &receiver)
        XCTAssertEqual(played, [Float](repeating: 0, count: 3 * frames) + [Float](repeating: 3, count: frames))
        XCTAssertEqual(receiver.concealedChunks, 2)
    }

    func testACorruptOpusPacketCostsItsFramesOnly() throws {
        let encoder = try OpusEncoder(channels: 2, bitrateKbps: 128)
        var format = PCStreamFormat()
        format.codec = .opus
        format.sampleRate = 48000
        format.channels = 2
        format.framesPerChunk = UInt32(encoder.framesPerPacket)
        format.preSkip = UInt32(encoder.preSkip)
        var receiver = receiver()
        var pcm: [Float] = []
        XCTAssertEqual(receiver.receive(welcome(), arrivedAt: 0, into: &pcm), .continues)
        XCTAssertEqual(receiver.receive(envelope(.streamFormat(format)), arrivedAt: 0, into: &pcm), .continues)
        let tone = (0..<960 * 2).map { Float(sin(Double($0 / 2) * 2 * .pi * 440 / 48000) * 0.5) }
        var rng = SystemRandomNumberGenerator()
        for k in 0..<10 {
            var chunk = pcmChunk(k)
            chunk.payload = k == 5 ? Data((0..<200).map { _ in UInt8.random(in: 0...255, using: &rng) })
                                   : Data(try tone.withUnsafeBufferPointer { try encoder.encode($0) })
            XCTAssertEqual(receiver.receive(envelope(.audioChunk(chunk)), arrivedAt: 0, into: &pcm), .continues)
        }
        XCTAssertEqual(pcm.count / 2, 10 * 960 - encoder.preSkip, "every chunk keeps its length")
        XCTAssertLessThanOrEqual(receiver.concealedChunks, 1, "random bytes may happen to decode as Opus")
    }

    func testDuplicatesAreDroppedAndANewTimelineWinsAfterAWhile() {
        var receiver = receiver()
        var played = play([welcome(), pcmFormat()] + (0..<3).map { envelope(.audioChunk(pcmChunk($0))) }
                          + (0..<3).map { envelope(.audioChunk(pcmChunk($0))) }, into: &receiver)
        XCTAssertEqual(played.count, 3 * frames, "a reconnect's repeated chunks play once")
        // A broadcaster whose timeline moved 10 s: refused at first, followed after `realignAfter` chunks.
        let moved = (3..<(3 + StreamReceiver.realignAfter + 2)).map { envelope(.audioChunk(pcmChunk($0, origin: 15_000_000_000))) }
        played = play(moved, into: &receiver)
        XCTAssertEqual(played.count, 3 * frames)
        XCTAssertEqual(receiver.droppedChunks, StreamReceiver.realignAfter - 1)
    }

    func testMetadataIsMadeSafe() {
        var receiver = receiver()
        var metadata = PCMetadata()
        metadata.title = "\u{1B}]0;pwned\u{07}" + String(repeating: "la\u{1B}[31m", count: 200_000)
        metadata.artist = "\r\n\t"
        metadata.durationFrames = .max
        _ = play([welcome(), envelope(.metadata(metadata))], into: &receiver)
        let title = try? XCTUnwrap(receiver.tags.title)
        XCTAssertFalse(title?.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } ?? true, title ?? "")
        XCTAssertLessThanOrEqual(title?.count ?? .max, StreamReceiver.textLimit + 1)
        XCTAssertNil(receiver.tags.artist)
        XCTAssertEqual(receiver.duration, .unknown)
        XCTAssertFalse(receiver.broadcasterName.contains("\u{1B}"))
    }

    // MARK: The inbox

    func testTheInboxPushesBackInsteadOfDropping() {
        let inbox = Inbox<PCEnvelope>()
        let resumed = Atomic<Int>(0)
        var accepted = 0
        let message = Inbox<PCEnvelope>.Item.message(PCEnvelope(), arrivedAt: 0)
        while inbox.put(message, bytes: 64 * 1024, resume: { resumed.add(1, ordering: .relaxed) }) { accepted += 1 }
        XCTAssertEqual(accepted + 1, Inbox<PCEnvelope>.byteBudget / (64 * 1024), "full at the budget")
        inbox.close(.closed("bye"))
        for _ in 0..<(accepted + 1) / 2 { _ = inbox.take(timeoutNanoseconds: 0) }
        XCTAssertEqual(resumed.load(ordering: .relaxed), 1, "reading resumes once half is taken")
        var rest: [Inbox<PCEnvelope>.Item] = []
        while let item = inbox.take(timeoutNanoseconds: 0) { rest.append(item) }
        XCTAssertEqual(rest.count, accepted + 1 - (accepted + 1) / 2 + 1, "nothing dropped")
        guard case .closed? = rest.last else { return XCTFail("the end of the connection comes last") }
    }

    /// Junk riding in a message (a field this build does not know) is dropped as it is decoded, so
    /// the inbox neither holds it nor counts it: a flood of it can't hold back the audio behind it.
    func testJunkInAMessageIsNeitherHeldNorCounted() throws {
        let junk = WireFraming.maxMessageBytes - 16
        var metadata = try PCMetadata(serializedBytes: [0x9A, 0x06, UInt8(junk & 0x7F | 0x80), UInt8(junk >> 7 & 0x7F | 0x80), UInt8(junk >> 14)]
                                          + [UInt8](repeating: 0x78, count: junk))
        XCTAssertEqual(metadata.unknownFields.data.count, junk + 5, "the junk is a field the decoder sees")
        metadata.title = "flood"
        let frame = try WireFraming.encode(envelope(.metadata(metadata)))
        var decoder = WireFrameDecoder()
        decoder.push(frame)
        let received = try XCTUnwrap(decoder.next())
        XCTAssertEqual(decoder.lastMessageBytes, frame.count, "framed as it came")
        guard case .metadata(let kept)? = received.body else { return XCTFail("a Metadata") }
        XCTAssertEqual(kept.title, "flood")
        XCTAssertTrue(kept.unknownFields.data.isEmpty && received.unknownFields.data.isEmpty, "nothing unknown kept")
        XCTAssertEqual(Inbox<PCEnvelope>.cost(of: received, framedBytes: decoder.lastMessageBytes), 9 + Inbox<PCEnvelope>.messageOverhead)

        // Tiny messages cost their bookkeeping: a flood of them is bounded by the budget too.
        let tiny = envelope(.metadata(PCMetadata()))
        XCTAssertEqual(Inbox<PCEnvelope>.cost(of: tiny, framedBytes: 6), 2 + Inbox<PCEnvelope>.messageOverhead)
    }
}
