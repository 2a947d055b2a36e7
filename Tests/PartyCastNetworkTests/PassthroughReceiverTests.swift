import Foundation
@testable import PartyCastNetwork
import PartyCastClock
import PartyCastCore
import PartyCastDecoder
import PartyCastSources
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// `--codec mp3` on the listener: MP3 frames from the wire decode as the same file does locally
/// (`MP3Source`, itself bit-exact with Debian's mpg123), each stream with a fresh decoder; a hostile
/// packet never reaches libmpg123 unchecked and costs its own frames only.
final class PassthroughReceiverTests: XCTestCase {
    let rate = 44100
    let origin: Int64 = 5_000_000_000

    func envelope(_ body: PCEnvelope.OneOf_Body) -> PCEnvelope {
        var envelope = PCEnvelope()
        envelope.body = body
        return envelope
    }

    func chunk(_ packet: AudioPacket, at position: Int, stream: UInt32) -> PCAudioChunk {
        var chunk = PCAudioChunk()
        chunk.mediaPosition = UInt64(position)
        chunk.presentationNanoseconds = origin + Int64(position) * 1_000_000_000 / Int64(rate)
        chunk.frameCount = UInt32(packet.frames)
        chunk.skipFrames = UInt32(packet.skipFrames)
        chunk.streamIndex = stream
        chunk.payload = Data(packet.payload)
        return chunk
    }

    func testPassedThroughFramesDecodeAsTheFileAndHostileOnesCostTheirFramesOnly() throws {
        let path = try fixture("cbr.mp3")
        let local = try MP3Source(bytes: FileByteSource(path: path))
        try local.prepare()
        var expected: [Float] = []
        while try local.produce(into: &expected) {}
        let source = MP3PacketSource(bytes: try FileByteSource(path: path))
        try source.prepare()
        var packets: [AudioPacket] = []
        while let packet = try source.nextPacket() { packets.append(packet) }

        var receiver = StreamReceiver(clockSync: ClockSync(clock: .system))
        var pcm: [Float] = []
        var welcome = PCWelcome()
        welcome.protocolVersion = partyCastProtocolVersion
        welcome.sessionID = 7
        var format = PCStreamFormat()
        format.codec = .mp3
        format.sampleRate = UInt32(rate)
        format.channels = 2
        format.framesPerChunk = 1152
        XCTAssertEqual(receiver.receive(envelope(.welcome(welcome)), arrivedAt: 0, into: &pcm), .continues)
        XCTAssertEqual(receiver.receive(envelope(.streamFormat(format)), arrivedAt: 0, into: &pcm), .continues)
        var position = 0
        func send(_ chunk: PCAudioChunk) {
            XCTAssertEqual(receiver.receive(envelope(.audioChunk(chunk)), arrivedAt: chunk.presentationNanoseconds, into: &pcm), .continues)
        }

        // The song as one stream: exactly the local decode.
        for packet in packets {
            send(chunk(packet, at: position, stream: 1))
            position += packet.frames
        }
        XCTAssertEqual(pcm.count, expected.count)
        XCTAssertTrue(pcm == expected, "the wire's decode differs from the local one (SNR \(snr(pcm[...], expected[...])) dB)")

        // Again as a new stream, with hostile packets in place of packets 20…25.
        pcm.removeAll()
        var rng = SystemRandomNumberGenerator()
        let frame = packets[30].payload
        var otherRate = frame
        otherRate[2] = otherRate[2] & ~0b0000_1100 | 0b0000_0100  // 44.1 kHz → 48 kHz
        let hostile: [(String, (inout PCAudioChunk) -> Void)] = [
            ("random bytes", { $0.payload = Data((0..<400).map { _ in UInt8.random(in: 0...255, using: &rng) }) }),
            ("a frame cut short", { $0.payload = Data(frame.prefix(frame.count - 1)) }),
            ("a frame and a half", { $0.payload = Data(frame + frame.prefix(frame.count / 2)) }),
            ("65 frames", { $0.payload = Data(Array(repeating: frame, count: MP3PacketDecoder.maximumFrames + 1).joined()) }),
            ("a frame at another rate", { $0.payload = Data(otherRate) }),
            ("a skip beyond any preroll", { $0.skipFrames = .max }),
        ]
        var held = 0
        for (k, packet) in packets.enumerated() {
            var next = chunk(packet, at: position, stream: 2)
            let before = pcm.count
            if (20..<20 + hostile.count).contains(k) {
                hostile[k - 20].1(&next)
            }
            send(next)
            if k < 20 { held = pcm.count }
            if (20..<20 + hostile.count - 1).contains(k) {
                XCTAssertEqual(pcm.count - before, packet.frames * 2, "\(hostile[k - 20].0): concealed for its frames")
                XCTAssertTrue(pcm[before...].allSatisfy { $0 == 0 }, "\(hostile[k - 20].0): concealed with silence")
            }
            position += packet.frames
        }
        XCTAssertTrue(pcm[..<held] == expected[..<held], "a fresh stream decodes exactly again")
        XCTAssertEqual(receiver.concealedChunks, hostile.count - 1)
        XCTAssertEqual(receiver.droppedChunks, 1, "the absurd skip")
        XCTAssertEqual(pcm.count, expected.count - packets[20 + hostile.count - 1].frames * 2, "every other chunk kept its length")
    }
}
