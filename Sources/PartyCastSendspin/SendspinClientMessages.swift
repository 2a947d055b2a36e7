#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The client's side of Sendspin's JSON messages: what a player sends (encoded as aiosendspin 10.2.1
// reads them without a non-compliance flag) and what a server sends it (decoded, every field checked
// by the session before use).

// MARK: Client → server

/// What a player asks for in its client/hello and reports in its client/state.
public struct SendspinPlayerProfile: Equatable, Sendable {
    public var name: String
    /// In order of preference.
    public var formats: [SendspinAudioFormat]
    /// Bytes of audio not yet played that the player can hold.
    public var bufferCapacity: Int
    /// Milliseconds from a stream's start to the first chunk the player can play in time.
    public var requiredLeadTimeMs: Int
    /// Milliseconds of audio the player wants in hand.
    public var minBufferMs: Int

    public init(name: String, formats: [SendspinAudioFormat], bufferCapacity: Int, requiredLeadTimeMs: Int, minBufferMs: Int) {
        self.name = name
        self.formats = formats
        self.bufferCapacity = bufferCapacity
        self.requiredLeadTimeMs = requiredLeadTimeMs
        self.minBufferMs = minBufferMs
    }
}

/// A message a client sends, as JSON text.
public enum SendspinClientOutgoing: Equatable, Sendable {
    case hello(SendspinPlayerProfile)
    case state(volume: Int, muted: Bool, profile: SendspinPlayerProfile)
    /// `clientTransmitted`: the client's clock, µs.
    case time(clientTransmitted: Int64)
    case goodbye(reason: String)

    public var encoded: [UInt8] {
        switch self {
        case .hello(let profile):
            // The spec asks every encrypted client to offer pairing_psk and say whether it admits
            // unpaired servers; aiosendspin flags a hello without them.
            return Self.envelope("client/hello", Hello(
                name: profile.name, supportedRoles: ["player@v1"],
                playerSupport: .init(supportedFormats: profile.formats, bufferCapacity: profile.bufferCapacity),
                supportedPairMethods: .init(pairingPsk: .init()), unpairedAccess: .init(enabled: true)))
        case let .state(volume, muted, profile):
            return Self.envelope("client/state", State(available: true, player: .init(
                volume: volume, muted: muted, outputDelayMs: 0, requiredLeadTimeMs: profile.requiredLeadTimeMs,
                minBufferMs: profile.minBufferMs, supportedCommands: ["volume", "mute"])))
        case .time(let clientTransmitted):
            return Self.envelope("client/time", ClientTime(clientTransmitted: clientTransmitted))
        case .goodbye(let reason):
            return Self.envelope("client/goodbye", ["reason": reason])
        }
    }

    private struct Envelope<P: Encodable>: Encodable {
        let type: String
        let payload: P
    }

    private static func envelope<P: Encodable>(_ type: String, _ payload: P) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(Envelope(type: type, payload: payload)))
        } catch {
            // Our own values of plain strings, numbers and booleans always encode.
            preconditionFailure("encoding \(type) failed: \(error)")
        }
    }

    private struct Hello: Encodable {
        struct PlayerSupport: Encodable {
            let supportedFormats: [SendspinAudioFormat]
            let bufferCapacity: Int
            enum CodingKeys: String, CodingKey { case supportedFormats = "supported_formats", bufferCapacity = "buffer_capacity" }
        }
        struct PairMethods: Encodable {
            struct Descriptor: Encodable {}
            let pairingPsk: Descriptor
            enum CodingKeys: String, CodingKey { case pairingPsk = "pairing_psk" }
        }
        struct UnpairedAccess: Encodable { let enabled: Bool }
        let name: String
        let supportedRoles: [String]
        let playerSupport: PlayerSupport
        let supportedPairMethods: PairMethods
        let unpairedAccess: UnpairedAccess
        enum CodingKeys: String, CodingKey {
            case name
            case supportedRoles = "supported_roles"
            case playerSupport = "player@v1_support"
            case supportedPairMethods = "supported_pair_methods"
            case unpairedAccess = "unpaired_access"
        }
    }

    private struct State: Encodable {
        struct Player: Encodable {
            let volume: Int
            let muted: Bool
            let outputDelayMs: Int
            let requiredLeadTimeMs: Int
            let minBufferMs: Int
            let supportedCommands: [String]
            enum CodingKeys: String, CodingKey {
                case volume, muted
                case outputDelayMs = "output_delay_ms"
                case requiredLeadTimeMs = "required_lead_time_ms"
                case minBufferMs = "min_buffer_ms"
                case supportedCommands = "supported_commands"
            }
        }
        let available: Bool
        let player: Player
    }
}

// MARK: Server → client

/// What a server sent a player, decoded; `.other` is a type this client does not act on.
public enum SendspinServerIncoming: Sendable {
    case hello(name: String)
    case activate(activeRoles: [String]?)
    case time(ServerTime)
    case streamStart(StreamStart)
    /// `roles` nil: every role's stream.
    case streamClear(roles: [String]?)
    case streamEnd(roles: [String]?)
    case command(PlayerCommand)
    case error(reason: String)
    case other(type: String)

    public struct ServerTime: Decodable, Sendable {
        public let clientTransmitted: Int64
        public let serverReceived: Int64
        public let serverTransmitted: Int64
        enum CodingKeys: String, CodingKey {
            case clientTransmitted = "client_transmitted", serverReceived = "server_received", serverTransmitted = "server_transmitted"
        }
    }

    public struct StreamStart: Decodable, Sendable {
        public struct Player: Decodable, Sendable {
            public let codec: String
            public let sampleRate: Int
            public let channels: Int
            public let bitDepth: Int
            /// Base64: FLAC's STREAMINFO, Opus's head.
            public let codecHeader: String?
            enum CodingKeys: String, CodingKey {
                case codec, channels
                case sampleRate = "sample_rate", bitDepth = "bit_depth", codecHeader = "codec_header"
            }
        }
        /// nil when the stream starts for another role only.
        public let player: Player?
    }

    public struct PlayerCommand: Decodable, Sendable {
        public let command: String
        public let volume: Int?
        public let mute: Bool?
    }

    private struct Kind: Decodable { let type: String }
    private struct Envelope<Payload: Decodable>: Decodable { let payload: Payload }
    private struct Hello: Decodable { let name: String }
    private struct Activate: Decodable {
        let activeRoles: [String]?
        enum CodingKeys: String, CodingKey { case activeRoles = "active_roles" }
    }
    private struct Roles: Decodable { let roles: [String]? }
    private struct Command: Decodable { let player: PlayerCommand? }
    private struct ServerError: Decodable { let reason: String? }

    /// Decodes one text message; throws for anything that is not a well-formed message.
    public static func decode(_ bytes: some Collection<UInt8>) throws -> SendspinServerIncoming {
        let data = Data(bytes)
        let decoder = JSONDecoder()
        func payload<P: Decodable>(_: P.Type) throws -> P { try decoder.decode(Envelope<P>.self, from: data).payload }
        let type = try decoder.decode(Kind.self, from: data).type
        switch type {
        case "server/hello": return .hello(name: try payload(Hello.self).name)
        case "server/activate": return .activate(activeRoles: try payload(Activate.self).activeRoles)
        case "server/time": return .time(try payload(ServerTime.self))
        case "stream/start": return .streamStart(try payload(StreamStart.self))
        case "stream/clear": return .streamClear(roles: (try? payload(Roles.self))?.roles)
        case "stream/end": return .streamEnd(roles: (try? payload(Roles.self))?.roles)
        case "server/command":
            guard let player = try payload(Command.self).player else { return .other(type: type) }
            return .command(player)
        case "server/error": return .error(reason: String(untrustedType: (try? payload(ServerError.self))?.reason ?? "no reason"))
        default: return .other(type: String(untrustedType: type))
        }
    }
}
