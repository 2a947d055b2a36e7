import PartyCastCore

/// A client of the party's Sendspin server, as its hello and the server's choices made it.
public struct SendspinPeer: Equatable, Sendable {
    public let clientID: String
    public let name: String
    /// The versioned roles the server activated: player, metadata, controller, those it asked for.
    public let activeRoles: [String]
    /// The format the server will stream in; nil when the player role is not active.
    public let format: SendspinAudioFormat?
    /// Bytes of not-yet-played audio the player can hold.
    public let bufferCapacity: Int
    /// The artwork channels its hello asked for (the spec's; aiosendspin 10's come in client/state).
    public let artworkChannels: [SendspinArtworkChannel]

    public func has(_ family: String) -> Bool { activeRoles.contains { $0.hasPrefix(family + "@") } }
}

/// A controller client's command, as the party understands it.
public enum SendspinControl: Equatable, Sendable {
    case play, pause, stop, next, previous
    case volume(Int)
    case mute(Bool)
}

/// The server's side of one Sendspin connection, free of I/O: the hello exchange, the roles and the
/// format it settles on, clock answers, and what the client's state and commands mean to the party.
/// Every message is hostile: sizes capped, malformed ones counted and skipped, too many end the session.
public struct SendspinServerSession: Sendable {
    /// How the connection was opened, which decides who speaks first and how hellos look.
    public enum Transport: Equatable, Sendable {
        /// The spec's: the client's hello first, answered by the spec's server/hello.
        case plain
        /// aiosendspin 10's, after its Noise handshake authenticated `clientID`: server/hello
        /// first, then the client's hello, answered by server/activate.
        case encrypted(clientID: String)
    }

    public struct Limits: Sendable {
        public var maxTextBytes = 64 * 1024
        public var maxBadMessages = 16
        /// Changes of its artwork channels a client may make: each may send up to 4 pictures.
        public var maxArtworkChanges = 64
        public init() {}
    }

    public enum Action: Equatable, Sendable {
        case send(SendspinServerMessage)
        /// The hello exchange is through: this client is in the party.
        case joined(SendspinPeer)
        /// The player reported its volume, mute or output delay (fields it left out: nil).
        case playerState(volume: Int?, muted: Bool?, outputDelayMs: Int?)
        /// The client is (or no longer is) available to play, e.g. taken by another source.
        case available(Bool)
        case control(SendspinControl)
        /// The artwork client's channels are now these.
        case artworkChannels([SendspinArtworkChannel])
        /// End the connection, for this reason (one line, for the log).
        case close(String)
    }

    private enum Phase { case awaitingHello, joined(SendspinPeer), ended }

    /// The roles this server implements, by family, in the versions it knows.
    static let implementedRoles = ["player@v1", "metadata@v1", "controller@v1", "artwork@v1"]

    public let serverID: String
    public let serverName: String
    public let transport: Transport
    /// The codecs this server can encode the party's audio in.
    public let encodable: Set<SendspinCodec>
    /// The party's rate and channels, which a format must have (nil: any).
    public let partyFormat: AudioFormat?
    public let limits: Limits
    private var phase = Phase.awaitingHello
    /// Malformed or out-of-place messages so far.
    public private(set) var badMessages = 0
    /// Well-formed messages of types this server does not act on (a newer client's, say).
    public private(set) var skippedMessages = 0
    /// The server/command player commands the player said it accepts (its latest client/state).
    public private(set) var playerCommands: Set<String> = []
    /// An artwork client's channels as they stand (its hello's, its client/state's, its requests').
    public private(set) var artworkChannels: [SendspinArtworkChannel] = []
    /// Changes of the artwork channels so far (client/state or stream/request-format).
    public private(set) var artworkChanges = 0
    /// The reason its client/goodbye gave (`restart`, `another_server`, ...), if it said goodbye with one.
    public private(set) var goodbyeReason: String?

    public init(serverID: String, serverName: String, transport: Transport, encodable: Set<SendspinCodec>, partyFormat: AudioFormat? = nil,
                limits: Limits = Limits()) {
        self.serverID = serverID
        self.serverName = serverName
        self.transport = transport
        self.encodable = encodable
        self.partyFormat = partyFormat
        self.limits = limits
    }

    public var peer: SendspinPeer? { if case .joined(let peer) = phase { peer } else { nil } }
    public var isEnded: Bool { if case .ended = phase { true } else { false } }

    /// What to send as the connection opens, before the client says anything.
    public func opening() -> [Action] {
        transport == .plain ? [] : [.send(.encryptedHello(name: serverName))]
    }

    /// One text message from the client, received at `receivedAt` (server clock, µs).
    public mutating func receiveText(_ bytes: some Collection<UInt8>, receivedAt: Int64) -> [Action] {
        if isEnded { return [] }
        guard bytes.count <= limits.maxTextBytes else { return bad("a text message of \(bytes.count) bytes") }
        let message: SendspinClientMessage
        do {
            message = try SendspinClientMessage.decode(bytes)
        } catch {
            return bad("a malformed message")
        }
        switch (phase, message) {
        case (.ended, _):
            return []
        case (.awaitingHello, .hello(let hello)):
            return welcome(hello)
        case (.awaitingHello, _):
            return end("it spoke before its client/hello")
        case (.joined, .hello):
            return bad("a second client/hello")
        case (.joined, .time(let time)):
            return [.send(.time(clientTransmitted: time.clientTransmitted, serverReceived: receivedAt))]
        case (.joined(let peer), .state(let state)):
            return apply(state, from: peer)
        case (.joined(let peer), .command(let command)):
            return apply(command, from: peer)
        case (.joined(let peer), .requestFormat(let request)):
            return apply(request, from: peer)
        case (.joined, .goodbye(let goodbye)):
            goodbyeReason = goodbye.reason.map { String(untrustedType: $0) }
            return end("it said goodbye (\(goodbyeReason ?? "no reason"))")
        case (.joined, .other):
            skippedMessages += 1
            return []
        }
    }

    /// A binary message from the client: players send none (the source role is not implemented).
    public mutating func receiveBinary(count: Int) -> [Action] {
        if isEnded { return [] }
        return bad("a binary message of \(count) bytes")
    }

    /// The format this server streams in for `formats` (the client's, in its order): the first it can
    /// encode at a rate, channel count and depth it can produce (the party's rate and channels, if given).
    public static func chooseFormat(from formats: [SendspinAudioFormat], encodable: Set<SendspinCodec>, partyFormat: AudioFormat? = nil) -> SendspinAudioFormat? {
        formats.first { format in
            guard encodable.contains(format.codec), (1...2).contains(format.channels) else { return false }
            if let partyFormat, partyFormat.sampleRate != format.sampleRate || partyFormat.channels != format.channels { return false }
            switch format.codec {
            case .pcm, .flac: return (8_000...192_000).contains(format.sampleRate) && [16, 24].contains(format.bitDepth)
            case .opus: return [8_000, 12_000, 16_000, 24_000, 48_000].contains(format.sampleRate)
            }
        }
    }

    private mutating func welcome(_ hello: ClientHello) -> [Action] {
        let clientID: String
        switch transport {
        case .encrypted(let authenticated):
            clientID = authenticated
        case .plain:
            guard let sent = hello.clientID, !sent.isEmpty, sent.utf8.count <= 200 else { return end("its client/hello has no usable client_id") }
            clientID = String(untrusted: sent, limit: 200)
        }
        var format: SendspinAudioFormat?
        var artworkChannels: [SendspinArtworkChannel] = []
        var roles: [String] = []
        for family in ["player", "metadata", "controller", "artwork"] {
            guard let role = hello.supportedRoles.first(where: { $0.hasPrefix(family + "@") && Self.implementedRoles.contains($0) }) else { continue }
            if family == "player" {
                guard let support = hello.playerSupport, support.bufferCapacity > 0,
                      let chosen = Self.chooseFormat(from: support.supportedFormats, encodable: encodable, partyFormat: partyFormat) else { continue }
                format = chosen
            }
            // The spec's channels in the hello must be 1–4 valid ones; aiosendspin 10's come later, in client/state.
            if family == "artwork", let listed = hello.artworkSupport?.channels {
                guard let checked = SendspinArtworkChannel.checked(listed) else { continue }
                artworkChannels = checked
            }
            roles.append(role)
        }
        guard !roles.isEmpty else { return end("it asked for no role this server plays (or no format it can encode)") }
        let peer = SendspinPeer(clientID: clientID, name: String(untrusted: hello.name, limit: 60), activeRoles: roles,
                                format: format, bufferCapacity: max(0, hello.playerSupport?.bufferCapacity ?? 0), artworkChannels: artworkChannels)
        phase = .joined(peer)
        self.artworkChannels = artworkChannels
        let reply: SendspinServerMessage = transport == .plain
            ? .hello(serverID: serverID, name: serverName, activeRoles: roles)
            : .activate(activeRoles: roles)
        return [.send(reply), .joined(peer)]
    }

    private mutating func apply(_ state: ClientState, from peer: SendspinPeer) -> [Action] {
        var actions: [Action] = []
        if let available = state.available ?? state.state.map({ $0 != "external_source" }) {
            actions.append(.available(available))
        }
        if let player = state.player {
            guard peer.has("player") else { return bad("player state from a client without the player role") }
            guard player.volume.map({ (0...100).contains($0) }) ?? true, player.outputDelayMs.map({ (0...5000).contains($0) }) ?? true else {
                return bad("a player state out of range")
            }
            if let commands = player.supportedCommands { playerCommands = Set(commands.prefix(16).map { String(untrustedType: $0) }) }
            actions.append(.playerState(volume: player.volume, muted: player.muted, outputDelayMs: player.outputDelayMs))
        }
        if let artwork = state.artwork {
            guard peer.has("artwork") else { return bad("artwork channels from a client without the artwork role") }
            guard let checked = SendspinArtworkChannel.checked(artwork.channels) else { return bad("artwork channels out of range") }
            if checked != artworkChannels {
                guard let change = changeArtwork(to: checked) else { return overArtworkBudget() }
                actions.append(change)
            }
        }
        return actions
    }

    /// The spec's way to change one artwork channel: answered, as the spec asks, by stream/start and
    /// the picture (the connection does both on `.artworkChannels`).
    private mutating func apply(_ request: ClientRequestFormat, from peer: SendspinPeer) -> [Action] {
        guard let change = request.artwork else {
            skippedMessages += 1
            return []
        }
        guard peer.has("artwork") else { return bad("an artwork format request from a client without the artwork role") }
        guard artworkChannels.indices.contains(change.channel) else { return bad("an artwork format request for channel \(change.channel), which it did not declare") }
        var channels = artworkChannels
        var channel = channels[change.channel]
        if let source = change.source { channel.source = source }
        if let format = change.format { channel.format = format }
        if let width = change.width { channel.width = width }
        if let height = change.height { channel.height = height }
        channels[change.channel] = channel
        guard let checked = SendspinArtworkChannel.checked(channels) else { return bad("an artwork format request out of range") }
        // The spec answers every request with stream/start, even one that changes nothing.
        guard let change = changeArtwork(to: checked) else { return overArtworkBudget() }
        return [change]
    }

    /// The channels are now `channels`, within the budget of changes; nil over it.
    private mutating func changeArtwork(to channels: [SendspinArtworkChannel]) -> Action? {
        guard artworkChanges < limits.maxArtworkChanges else { return nil }
        artworkChanges += 1
        artworkChannels = channels
        return .artworkChannels(channels)
    }

    private mutating func overArtworkBudget() -> [Action] {
        badMessages += 1
        return end("it changed its artwork channels more than \(limits.maxArtworkChanges) times")
    }

    private mutating func apply(_ command: ClientCommand, from peer: SendspinPeer) -> [Action] {
        guard let controller = command.controller else {
            skippedMessages += 1
            return []
        }
        guard peer.has("controller") else { return bad("a controller command from a client without the controller role") }
        switch controller.command {
        case "play": return [.control(.play)]
        case "pause": return [.control(.pause)]
        case "stop": return [.control(.stop)]
        case "next": return [.control(.next)]
        case "previous": return [.control(.previous)]
        case "volume":
            guard let volume = controller.volume, (0...100).contains(volume) else { return bad("a volume command without a volume in 0–100") }
            return [.control(.volume(volume))]
        case "mute":
            guard let mute = controller.mute else { return bad("a mute command without mute") }
            return [.control(.mute(mute))]
        default:
            // Not in the supported_commands this server announced: ignored, as the spec says.
            skippedMessages += 1
            return []
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
