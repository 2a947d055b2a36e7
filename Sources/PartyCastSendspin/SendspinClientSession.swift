#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The player's side of one Sendspin connection, free of I/O: the encrypted opening, the hello
/// exchange, and what each server message means to a player. It takes WebSocket frames as they came
/// and answers with frames to send and events for the player. Every byte is hostile: sizes capped,
/// every number range-checked, malformed or out-of-place messages counted and skipped, and too many
/// of them (or one it cannot go on after) end the session with a one-line reason.
public struct SendspinClientSession: Sendable {
    public struct Limits: Sendable {
        public var maxTextBytes = 64 * 1024
        /// An audio chunk: 100 ms of 24-bit stereo PCM at 192 kHz is 115 kB.
        public var maxBinaryBytes = 256 * 1024
        public var maxBadMessages = 16
        public init() {}
    }

    /// A stream the player can play, as stream/start announced it (checked against what the hello asked for).
    public struct Stream: Equatable, Sendable {
        public let format: SendspinAudioFormat
        public let codecHeader: [UInt8]?

        public init(format: SendspinAudioFormat, codecHeader: [UInt8]?) {
            self.format = format
            self.codecHeader = codecHeader
        }
    }

    public enum Action: Equatable, Sendable {
        /// Send this WebSocket text frame (only before the handshake is through).
        case sendText([UInt8])
        /// Send this WebSocket binary frame.
        case sendBinary([UInt8])
        /// The server activated the player role: playing may begin.
        case joined(serverName: String)
        /// A clock exchange's three times (µs): the client's t1 echoed, the server's t2 and t3.
        case clock(clientTransmitted: Int64, serverReceived: Int64, serverTransmitted: Int64)
        case streamStart(Stream)
        /// Drop what is buffered and not yet heard (a seek, a skip).
        case streamClear
        case streamEnd
        /// An audio chunk: its first sample is due at `timestamp` (server clock, µs).
        case audio(timestamp: Int64, payload: [UInt8])
        case volume(Int)
        case mute(Bool)
        case close(String)
    }

    private enum Phase { case handshaking(SendspinClientHandshake), awaitingHello, awaitingActivate, playing, ended }

    public let profile: SendspinPlayerProfile
    public let limits: Limits
    private var phase: Phase
    private var channel: SendspinSecureChannel?
    private var stream: Stream?
    private var volume = 100
    private var muted = false
    public private(set) var serverName = ""
    /// Malformed or out-of-place messages so far.
    public private(set) var badMessages = 0
    /// Well-formed messages of types a player does not act on (metadata, group updates, a newer server's).
    public private(set) var skippedMessages = 0

    public init(profile: SendspinPlayerProfile, handshake: SendspinClientHandshake = .init(), limits: Limits = Limits()) {
        self.profile = profile
        self.limits = limits
        phase = .handshaking(handshake)
    }

    public var isEnded: Bool { if case .ended = phase { true } else { false } }
    public var isPlaying: Bool { if case .playing = phase { true } else { false } }

    /// What to send as the WebSocket opens.
    public func opening() -> [Action] {
        guard case .handshaking(let handshake) = phase else { return [] }
        return [.sendText(handshake.clientInit)]
    }

    /// A client/time request stamped `now` (the client's clock, µs); nil before the server has activated the player.
    public mutating func timeRequest(now: Int64) -> Action? {
        guard isPlaying else { return nil }
        return seal(.time(clientTransmitted: now))
    }

    /// The goodbye to send before closing, if the session got that far.
    public mutating func goodbye() -> Action? {
        guard isPlaying || { if case .awaitingActivate = phase { true } else { false } }() else { return nil }
        return seal(.goodbye(reason: "shutdown"))
    }

    /// One WebSocket text frame.
    public mutating func receive(text: some Collection<UInt8>) -> [Action] {
        guard case .handshaking(var handshake) = phase else {
            // After the handshake every message comes sealed in a binary frame.
            return isEnded ? [] : bad("a text frame after the handshake")
        }
        switch handshake.receive(text: text) {
        case .wait:
            phase = .handshaking(handshake)
            return []
        case .reply(let frame):
            phase = .handshaking(handshake)
            return [.sendText(frame)]
        case .established(let reply, _, let channel):
            self.channel = channel
            phase = .awaitingHello
            return [.sendText(reply)]
        case .fail(let reason):
            return end(reason)
        }
    }

    /// One WebSocket binary frame.
    public mutating func receive(binary frame: some Collection<UInt8>) -> [Action] {
        if isEnded { return [] }
        guard var channel else { return end("it sent a binary frame during the handshake") }
        guard frame.count <= limits.maxBinaryBytes else { return bad("a frame of \(frame.count) bytes") }
        let message: SendspinSecureChannel.Message
        do throws(NoiseError) {
            message = try channel.open(frame)
            self.channel = channel
        } catch {
            // A forged frame leaves the nonces where they were; a fragment is skipped whole.
            self.channel = channel
            return bad(error.reason)
        }
        switch message {
        case .text(let json): return receive(json: json)
        case .binary(let bytes): return receive(audioFrame: bytes)
        }
    }

    private mutating func receive(json: [UInt8]) -> [Action] {
        guard json.count <= limits.maxTextBytes else { return bad("a text message of \(json.count) bytes") }
        let message: SendspinServerIncoming
        do {
            message = try SendspinServerIncoming.decode(json)
        } catch {
            return bad("a malformed message")
        }
        switch (phase, message) {
        case (_, .error(let reason)):
            return end("the server reported an error (\(reason))")
        case (.awaitingHello, .hello(let name)):
            serverName = String(untrusted: name, limit: 60)
            phase = .awaitingActivate
            return [seal(.hello(profile))]
        case (.awaitingHello, _):
            return end("it spoke before its server/hello")
        case (.awaitingActivate, .activate(let roles)):
            guard roles?.contains("player@v1") ?? false else { return end("it did not activate the player role") }
            phase = .playing
            // The spec's first client/state follows the activation: without it the server waits.
            return [seal(.state(volume: volume, muted: muted, profile: profile)), .joined(serverName: serverName)]
        case (.awaitingActivate, _):
            return bad("a message before its server/activate")
        case (.playing, .time(let time)):
            return [.clock(clientTransmitted: time.clientTransmitted, serverReceived: time.serverReceived, serverTransmitted: time.serverTransmitted)]
        case (.playing, .streamStart(let start)):
            guard let player = start.player else {
                skippedMessages += 1
                return []
            }
            return begin(player)
        case (.playing, .streamClear(let roles)):
            guard stream != nil, roles?.contains("player") ?? true else { return [] }
            return [.streamClear]
        case (.playing, .streamEnd(let roles)):
            guard roles?.contains("player") ?? true else { return [] }
            stream = nil
            return [.streamEnd]
        case (.playing, .command(let command)):
            return apply(command)
        case (.playing, .activate(let roles)):
            // A later activation may take the player role away: nothing is left to do here.
            if let roles, !roles.contains("player@v1") { return end("the server took the player role away") }
            return []
        case (.playing, .hello), (.ended, _), (.handshaking, _):
            return bad("a message out of place")
        case (.playing, .other):
            skippedMessages += 1
            return []
        }
    }

    private mutating func receive(audioFrame bytes: [UInt8]) -> [Action] {
        guard isPlaying else { return bad("a binary message before the player role was active") }
        // aiosendspin sends an encrypted client's chunks with its 13-byte header (send_ahead).
        guard let frame = SendspinFrame(bytes[...], audioHeader: .withSendAhead) else { return bad("a binary message shorter than its header") }
        guard frame.kind == .audio else {
            skippedMessages += 1
            return []
        }
        guard stream != nil else { return bad("audio before stream/start") }
        // Server clock µs: never negative, never centuries (the clock filter takes 2⁶² ns at most).
        guard (0..<(1 << 52)).contains(frame.timestamp), !frame.payload.isEmpty else { return bad("an audio chunk with timestamp \(frame.timestamp)") }
        return [.audio(timestamp: frame.timestamp, payload: Array(frame.payload))]
    }

    /// A stream/start: the format must be one the hello offered, since only those can be decoded.
    private mutating func begin(_ player: SendspinServerIncoming.StreamStart.Player) -> [Action] {
        guard let codec = SendspinCodec(rawValue: player.codec) else { return end("it started a stream in a codec this player did not offer") }
        let format = SendspinAudioFormat(codec: codec, channels: player.channels, sampleRate: player.sampleRate, bitDepth: player.bitDepth)
        guard profile.formats.contains(format) else {
            return end("it started a stream in a format this player did not offer (\(codec.rawValue) \(player.sampleRate) Hz, \(player.channels) ch, \(player.bitDepth) bit)")
        }
        var header: [UInt8]?
        if let text = player.codecHeader {
            guard text.utf8.count <= limits.maxTextBytes, let decoded = Data(base64Encoded: text) else { return end("its codec_header is not base64") }
            header = Array(decoded)
        }
        let started = Stream(format: format, codecHeader: header)
        stream = started
        return [.streamStart(started)]
    }

    private mutating func apply(_ command: SendspinServerIncoming.PlayerCommand) -> [Action] {
        switch command.command {
        case "volume":
            guard let level = command.volume, (0...100).contains(level) else { return bad("a volume command without a volume in 0–100") }
            volume = level
            // The spec asks a player to report the state a command changed.
            return [.volume(level), seal(.state(volume: volume, muted: muted, profile: profile))]
        case "mute":
            guard let mute = command.mute else { return bad("a mute command without mute") }
            muted = mute
            return [.mute(mute), seal(.state(volume: volume, muted: muted, profile: profile))]
        default:
            // Not among the supported_commands this player announced.
            skippedMessages += 1
            return []
        }
    }

    private mutating func seal(_ message: SendspinClientOutgoing) -> Action {
        guard var channel else { return .close("no channel to send on") }
        do throws(NoiseError) {
            let frame = try channel.seal(text: message.encoded)
            self.channel = channel
            return .sendBinary(frame)
        } catch {
            phase = .ended
            return .close("could not seal a message: \(error.reason)")
        }
    }

    private mutating func bad(_ what: String) -> [Action] {
        badMessages += 1
        guard badMessages >= limits.maxBadMessages else { return [] }
        return end("\(badMessages) bad messages, the last \(what)")
    }

    private mutating func end(_ reason: String) -> [Action] {
        phase = .ended
        return [.close(reason)]
    }
}
