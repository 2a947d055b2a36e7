#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Sendspin's JSON messages (github.com/Sendspin/spec), as `aiosendspin` 10.2.1 writes and reads them
// where the two differ: every text message is `{"type": …, "payload": {…}}`; keys are snake_case.

/// The audio codecs the spec names; an unknown one in a peer's list is skipped, not an error.
public enum SendspinCodec: String, Codable, Sendable, CaseIterable {
    case pcm, flac, opus
}

/// One audio format, as a player lists what it can play and as `stream/start` announces the stream.
public struct SendspinAudioFormat: Codable, Equatable, Sendable {
    public var codec: SendspinCodec
    public var channels: Int
    public var sampleRate: Int
    public var bitDepth: Int

    public init(codec: SendspinCodec, channels: Int, sampleRate: Int, bitDepth: Int) {
        self.codec = codec
        self.channels = channels
        self.sampleRate = sampleRate
        self.bitDepth = bitDepth
    }

    enum CodingKeys: String, CodingKey {
        case codec, channels
        case sampleRate = "sample_rate"
        case bitDepth = "bit_depth"
    }
}

/// A format entry whose codec may be one this side does not know (skipped by the format choice).
struct ListedFormat: Decodable {
    let format: SendspinAudioFormat?

    init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: SendspinAudioFormat.CodingKeys.self)
        guard let codec = SendspinCodec(rawValue: try container.decode(String.self, forKey: .codec)) else {
            format = nil
            return
        }
        format = SendspinAudioFormat(codec: codec, channels: try container.decode(Int.self, forKey: .channels),
                                     sampleRate: try container.decode(Int.self, forKey: .sampleRate),
                                     bitDepth: try container.decode(Int.self, forKey: .bitDepth))
    }
}

// MARK: Client → server

public struct ClientHello: Decodable, Sendable {
    public struct PlayerSupport: Decodable, Sendable {
        /// In the client's order of preference; codecs this side does not know are left out.
        public let supportedFormats: [SendspinAudioFormat]
        public let bufferCapacity: Int

        enum CodingKeys: String, CodingKey {
            case supportedFormats = "supported_formats"
            case bufferCapacity = "buffer_capacity"
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            supportedFormats = try container.decode([ListedFormat].self, forKey: .supportedFormats).compactMap(\.format)
            bufferCapacity = try container.decode(Int.self, forKey: .bufferCapacity)
        }
    }

    /// Sent by spec-v1 (unencrypted) clients; an encrypted client's id comes from its handshake.
    public let clientID: String?
    public let name: String
    public let version: Int?
    public let supportedRoles: [String]
    public let playerSupport: PlayerSupport?
    /// The spec's artwork channels; aiosendspin 10 clients say them in client/state instead.
    public let artworkSupport: ArtworkChannels?

    enum CodingKeys: String, CodingKey {
        case clientID = "client_id"
        case name, version
        case supportedRoles = "supported_roles"
        case playerSupport = "player@v1_support"
        case artworkSupport = "artwork@v1_support"
    }
}

/// An artwork client's channels, as it lists them (unchecked: `SendspinArtworkChannel.checked`).
public struct ArtworkChannels: Decodable, Sendable {
    public let channels: [SendspinArtworkChannel]
}

public struct ClientTime: Codable, Sendable {
    public let clientTransmitted: Int64
    public init(clientTransmitted: Int64) { self.clientTransmitted = clientTransmitted }
    enum CodingKeys: String, CodingKey { case clientTransmitted = "client_transmitted" }
}

public struct ClientState: Decodable, Sendable {
    public struct Player: Decodable, Sendable {
        public let volume: Int?
        public let muted: Bool?
        /// aiosendspin's name; `static_delay_ms` is its older one, read when this is absent.
        public let outputDelayMs: Int?
        public let supportedCommands: [String]?

        enum CodingKeys: String, CodingKey {
            case volume, muted
            case outputDelayMs = "output_delay_ms"
            case staticDelayMs = "static_delay_ms"
            case supportedCommands = "supported_commands"
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            volume = try container.decodeIfPresent(Int.self, forKey: .volume)
            muted = try container.decodeIfPresent(Bool.self, forKey: .muted)
            outputDelayMs = try container.decodeIfPresent(Int.self, forKey: .outputDelayMs)
                ?? container.decodeIfPresent(Int.self, forKey: .staticDelayMs)
            supportedCommands = try container.decodeIfPresent([String].self, forKey: .supportedCommands)
        }
    }

    /// aiosendspin's `available`; the spec's `state` ('synchronized' | 'error' | 'external_source').
    public let available: Bool?
    public let state: String?
    public let player: Player?
    public let artwork: ArtworkChannels?
}

public struct ClientCommand: Decodable, Sendable {
    public struct Controller: Decodable, Sendable {
        public let command: String
        public let volume: Int?
        public let mute: Bool?
    }
    public let controller: Controller?
}

/// The spec's stream/request-format; only its artwork object is acted on (a player's format is the
/// party's, chosen at its hello).
public struct ClientRequestFormat: Decodable, Sendable {
    /// One channel's change: the fields given replace the channel's.
    public struct Artwork: Decodable, Sendable {
        public let channel: Int
        public let source: String?
        public let format: String?
        public let width: Int?
        public let height: Int?

        enum CodingKeys: String, CodingKey {
            case channel, source, format, width, height
            case mediaWidth = "media_width", mediaHeight = "media_height"
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            channel = try container.decode(Int.self, forKey: .channel)
            source = try container.decodeIfPresent(String.self, forKey: .source)
            format = try container.decodeIfPresent(String.self, forKey: .format)
            width = try container.decodeIfPresent(Int.self, forKey: .width) ?? container.decodeIfPresent(Int.self, forKey: .mediaWidth)
            height = try container.decodeIfPresent(Int.self, forKey: .height) ?? container.decodeIfPresent(Int.self, forKey: .mediaHeight)
        }
    }
    public let artwork: Artwork?
}

public struct ClientGoodbye: Decodable, Sendable {
    public let reason: String?
}

/// What a client sent, decoded; `.other` is a message type this side does not act on.
public enum SendspinClientMessage: Sendable {
    case hello(ClientHello)
    case time(ClientTime)
    case state(ClientState)
    case command(ClientCommand)
    case goodbye(ClientGoodbye)
    case requestFormat(ClientRequestFormat)
    case other(type: String)

    private struct Kind: Decodable { let type: String }
    private struct Envelope<Payload: Decodable>: Decodable { let payload: Payload }

    /// Decodes one text message; throws for anything that is not a well-formed message.
    public static func decode(_ bytes: some Collection<UInt8>) throws -> SendspinClientMessage {
        let data = Data(bytes)
        let decoder = JSONDecoder()
        func payload<P: Decodable>(_: P.Type) throws -> P { try decoder.decode(Envelope<P>.self, from: data).payload }
        let type = try decoder.decode(Kind.self, from: data).type
        switch type {
        case "client/hello": return .hello(try payload(ClientHello.self))
        case "client/time": return .time(try payload(ClientTime.self))
        case "client/state": return .state(try payload(ClientState.self))
        case "client/command": return .command(try payload(ClientCommand.self))
        case "client/goodbye": return .goodbye(try payload(ClientGoodbye.self))
        case "stream/request-format": return .requestFormat(try payload(ClientRequestFormat.self))
        default: return .other(type: String(untrustedType: type))
        }
    }
}

extension String {
    /// A peer's message type, short and printable, for logs and counters.
    init(untrustedType type: String) {
        self = String(type.unicodeScalars.prefix(40).filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }.map(Character.init))
    }
}
