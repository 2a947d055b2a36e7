#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The group's playback state in `group/update`.
public enum SendspinPlaybackState: String, Encodable, Sendable {
    case playing, stopped
}

/// Track details for clients with the metadata role (`server/state`'s `metadata`).
public struct SendspinMetadata: Encodable, Equatable, Sendable {
    public struct Progress: Encodable, Equatable, Sendable {
        public var trackProgressMs: Int
        /// 0 for a live stream of unknown length.
        public var trackDurationMs: Int
        /// Speed × 1000: 1000 playing, 0 paused.
        public var playbackSpeed: Int

        public init(trackProgressMs: Int, trackDurationMs: Int, playbackSpeed: Int) {
            self.trackProgressMs = trackProgressMs
            self.trackDurationMs = trackDurationMs
            self.playbackSpeed = playbackSpeed
        }

        enum CodingKeys: String, CodingKey {
            case trackProgressMs = "track_progress"
            case trackDurationMs = "track_duration"
            case playbackSpeed = "playback_speed"
        }
    }

    enum CodingKeys: String, CodingKey {
        case timestamp, title, artist, album, progress, shuffle
        case repeatMode = "repeat"
    }

    /// Server clock, µs: when these details hold.
    public var timestamp: Int64
    public var title: String?
    public var artist: String?
    public var album: String?
    public var progress: Progress?
    /// The spec keeps repeat and shuffle here; the party has neither.
    let repeatMode = "off"
    let shuffle = false

    public init(timestamp: Int64, title: String?, artist: String?, album: String?, progress: Progress?) {
        self.timestamp = timestamp
        self.title = title
        self.artist = artist
        self.album = album
        self.progress = progress
    }
}

/// The group's controls for clients with the controller role (`server/state`'s `controller`).
public struct SendspinControllerState: Encodable, Equatable, Sendable {
    public var supportedCommands: [String]
    public var volume: Int
    public var muted: Bool
    /// aiosendspin 10 requires repeat and shuffle here (the spec has them in metadata).
    let repeatMode = "off"
    let shuffle = false

    public init(supportedCommands: [String], volume: Int, muted: Bool) {
        self.supportedCommands = supportedCommands
        self.volume = volume
        self.muted = muted
    }

    enum CodingKeys: String, CodingKey {
        case supportedCommands = "supported_commands"
        case volume, muted, shuffle
        case repeatMode = "repeat"
    }
}

/// A command to one player (`server/command`'s `player`).
public enum SendspinPlayerCommand: Equatable, Sendable {
    case volume(Int)
    case mute(Bool)
    /// aiosendspin's `set_output_delay` (0–5000 ms the player plays early, for its speaker's own
    /// delay); not in the spec's README yet.
    case outputDelay(milliseconds: Int)
}

/// What the server sends; `encoded(transmittedAt:)` stamps the send time where a message carries one.
public enum SendspinServerMessage: Equatable, Sendable {
    /// The spec's server/hello, the reply to an unencrypted client's client/hello.
    case hello(serverID: String, name: String, activeRoles: [String])
    /// aiosendspin 10's server/hello, sent first on an encrypted connection (the id is the handshake's).
    case encryptedHello(name: String)
    /// aiosendspin 10's server/activate: on an encrypted connection, what the spec's hello reply does.
    case activate(activeRoles: [String])
    case time(clientTransmitted: Int64, serverReceived: Int64)
    case streamStart(SendspinAudioFormat, codecHeader: [UInt8]?)
    /// stream/start for the artwork role: what each channel carries.
    case artworkStart([SendspinArtworkChannel])
    case streamClear
    case streamEnd
    case groupUpdate(SendspinPlaybackState, groupID: String, groupName: String)
    case metadata(SendspinMetadata)
    case controller(SendspinControllerState)
    case command(SendspinPlayerCommand)

    public var type: String {
        switch self {
        case .hello, .encryptedHello: "server/hello"
        case .activate: "server/activate"
        case .time: "server/time"
        case .streamStart, .artworkStart: "stream/start"
        case .streamClear: "stream/clear"
        case .streamEnd: "stream/end"
        case .groupUpdate: "group/update"
        case .metadata, .controller: "server/state"
        case .command: "server/command"
        }
    }

    /// The message as JSON text; `now` is the server clock (µs) at sending.
    public func encoded(transmittedAt now: Int64) -> [UInt8] {
        switch self {
        case let .hello(serverID, name, activeRoles):
            return envelope(LegacyHello(serverID: serverID, name: name, version: 1, activeRoles: activeRoles, connectionReason: "discovery"))
        case let .encryptedHello(name):
            return envelope(["name": name])
        case let .activate(activeRoles):
            return envelope(Activate(activities: ["playback"], activeRoles: activeRoles))
        case let .time(clientTransmitted, serverReceived):
            return envelope(["client_transmitted": clientTransmitted, "server_received": serverReceived, "server_transmitted": now])
        case let .streamStart(format, codecHeader):
            return envelope(StreamStart(serverTransmitted: now, player: .init(format: format, codecHeader: codecHeader.map { Data($0).base64EncodedString() })))
        case let .artworkStart(channels):
            return envelope(ArtworkStart(serverTransmitted: now, artwork: .init(channels: channels)))
        case .streamClear:
            return envelope(StreamClear(serverTransmitted: now, roles: ["player"]))
        case .streamEnd:
            return envelope(["roles": ["player"]])
        case let .groupUpdate(state, groupID, groupName):
            return envelope(["playback_state": state.rawValue, "group_id": groupID, "group_name": groupName])
        case let .metadata(metadata):
            return envelope(["metadata": metadata])
        case let .controller(controller):
            return envelope(["controller": controller])
        case let .command(.volume(volume)):
            return envelope(["player": PlayerCommand(command: "volume", volume: volume, mute: nil, outputDelayMs: nil)])
        case let .command(.mute(mute)):
            return envelope(["player": PlayerCommand(command: "mute", volume: nil, mute: mute, outputDelayMs: nil)])
        case let .command(.outputDelay(milliseconds)):
            return envelope(["player": PlayerCommand(command: "set_output_delay", volume: nil, mute: nil, outputDelayMs: milliseconds)])
        }
    }

    private func envelope<P: Encodable>(_ payload: P) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        do {
            return Array(try encoder.encode(Envelope(type: type, payload: payload)))
        } catch {
            // Our own values of plain strings and integers always encode.
            preconditionFailure("encoding \(type) failed: \(error)")
        }
    }
}

private struct Envelope<P: Encodable>: Encodable {
    let type: String
    let payload: P
}

private struct LegacyHello: Encodable {
    let serverID: String
    let name: String
    let version: Int
    let activeRoles: [String]
    let connectionReason: String

    enum CodingKeys: String, CodingKey {
        case serverID = "serverId"
        case name, version, activeRoles, connectionReason
    }
}

private struct Activate: Encodable {
    let activities: [String]
    let activeRoles: [String]
}

private struct StreamStart: Encodable {
    struct Player: Encodable {
        let format: SendspinAudioFormat
        let codecHeader: String?

        func encode(to encoder: Encoder) throws {
            try format.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(codecHeader, forKey: .codecHeader)
        }

        enum CodingKeys: String, CodingKey { case codecHeader }
    }
    let serverTransmitted: Int64
    let player: Player
}

private struct ArtworkStart: Encodable {
    struct Artwork: Encodable { let channels: [SendspinArtworkChannel] }
    let serverTransmitted: Int64
    let artwork: Artwork
}

private struct StreamClear: Encodable {
    let serverTransmitted: Int64
    let roles: [String]
}

private struct PlayerCommand: Encodable {
    let command: String
    let volume: Int?
    let mute: Bool?
    let outputDelayMs: Int?
}
