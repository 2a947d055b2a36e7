import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import PartyCastControlSeam
import PartyCastCLI
import PartyCastControl
import PartyCastCore
import PartyCastDiscovery
import PartyCastWire

struct Ctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Control a running party from the command line, through its remote control (HTTP API).",
        discussion: """
            ACTION: pause | resume | next | previous | seek SECONDS | add PATH | volume [LISTENER] PERCENT \
            | mute LISTENER | unmute LISTENER | channel LISTENER left|right|mono|stereo | tone HERTZ | identify LISTENER | status

            identify plays a short chime on that listener's speaker alone, over the party: which speaker is which.

            Finds the party NAME (or the only one on the LAN) by mDNS, or talks to --url directly. LISTENER is \
            a listener's id or its name. PATH is a file of the party's library: as the remote page lists it, \
            its absolute path, or its path inside the library folder.

            A refused command prints the party's reason; exit status 10 for a refusal, 12 for a missing or \
            wrong party key, 7 when the party cannot be reached.
            """)

    @Argument(help: ArgumentHelp("[NAME] ACTION [ARGUMENTS]", valueName: "words"))
    var words: [String]

    @Option(help: "The party's remote control, e.g. http://host:7361 (printed by `broadcaster share`), instead of mDNS.")
    var url: String?

    @OptionGroup var key: PartyKeyOptions

    @OptionGroup var logging: LoggingOptions

    /// One request to the API.
    struct Request {
        var method: HTTPMethod
        var path: String
        var body: (any Encodable)?
        /// The listener the request sets something of: its line is printed too.
        var listener: String?
    }

    private static let verbs: Set = ["pause", "resume", "next", "previous", "seek", "add", "volume", "mute", "unmute", "channel", "tone", "identify",
                                     "status"]

    /// Splits the words into the party's name (if any) and the request they ask for.
    static func parse(_ words: [String]) throws(ValidationError) -> (name: String?, request: Request) {
        var words = words
        let name = words.first.map { verbs.contains($0) } == false ? words.removeFirst() : nil
        guard let verb = words.first else {
            throw ValidationError("say what to do: pause, resume, next, previous, seek, add, volume, mute, unmute, channel, tone, identify or status")
        }
        let arguments = Array(words.dropFirst())
        func wants(_ count: Int, _ usage: String) throws(ValidationError) {
            guard arguments.count == count else { throw ValidationError("usage: broadcaster ctl [NAME] \(usage)") }
        }
        func percent(_ text: String) throws(ValidationError) -> Int {
            guard let value = Int(text.hasSuffix("%") ? String(text.dropLast()) : text) else { throw ValidationError("\(text) is not a whole percentage") }
            return value
        }
        func listenerPath(_ listener: String) -> String {
            "/api/listeners/" + (listener.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? listener)
        }
        switch verb {
        case "pause", "resume", "next", "previous":
            try wants(0, verb)
            return (name, Request(method: .POST, path: "/api/\(verb)"))
        case "status":
            try wants(0, "status")
            return (name, Request(method: .GET, path: "/api/status"))
        case "seek":
            try wants(1, "seek SECONDS")
            guard let seconds = Double(arguments[0]), seconds.isFinite else { throw ValidationError("\(arguments[0]) is not a number of seconds") }
            return (name, Request(method: .POST, path: "/api/seek", body: ControlRequest.Seek(seconds: seconds)))
        case "tone":
            try wants(1, "tone HERTZ")
            guard let hertz = Double(arguments[0]), hertz.isFinite else { throw ValidationError("\(arguments[0]) is not a frequency in hertz") }
            return (name, Request(method: .PUT, path: "/api/tone", body: ControlRequest.Tone(hertz: hertz)))
        case "add":
            try wants(1, "add PATH")
            return (name, Request(method: .POST, path: "/api/queue", body: ControlRequest.Add(path: arguments[0])))
        case "volume":
            guard (1...2).contains(arguments.count) else { throw ValidationError("usage: broadcaster ctl [NAME] volume [LISTENER] PERCENT") }
            let body = ControlRequest.Volume(percent: try percent(arguments[arguments.count - 1]))
            guard arguments.count == 2 else { return (name, Request(method: .PUT, path: "/api/volume", body: body)) }
            return (name, Request(method: .PUT, path: listenerPath(arguments[0]) + "/volume", body: body, listener: arguments[0]))
        case "channel":
            try wants(2, "channel LISTENER \(ChannelAssignment.names)")
            guard let channel = ChannelAssignment(rawValue: arguments[1]) else { throw ValidationError("\(arguments[1]) is not a channel: \(ChannelAssignment.names)") }
            return (name, Request(method: .PUT, path: listenerPath(arguments[0]) + "/channel", body: ControlRequest.Channel(channel: channel), listener: arguments[0]))
        case "identify":
            try wants(1, "identify LISTENER")
            return (name, Request(method: .POST, path: listenerPath(arguments[0]) + "/identify", listener: arguments[0]))
        default:  // mute, unmute
            try wants(1, "\(verb) LISTENER")
            return (name, Request(method: .PUT, path: listenerPath(arguments[0]) + "/mute", body: ControlRequest.Mute(muted: verb == "mute"), listener: arguments[0]))
        }
    }

    func validate() throws {
        _ = try Self.parse(words)
    }

    func run() async throws {
        _ = logging.bootstrap(program: "broadcaster")
        let (name, request) = try Self.parse(words)
        let secret = try key.resolvedSecret
        do throws(PartyCastError) {
            let base = if let url { try Self.checked(url) } else { try Self.discover(name: name) }
            // The key itself never goes out: a token from the key handshake does, once the party proved it holds the key.
            let token = if let secret { try await Self.openSession(at: base, key: PartyKey(secret: secret)) } else { nil as String? }
            let snapshot = try await Self.send(request, to: base, bearer: token)
            if request.path == "/api/status" {
                for line in Self.summary(snapshot) { Console.output(line) }
            } else {
                Console.output(Self.oneLine(snapshot))
                if let listener = request.listener, let set = snapshot.listeners.first(where: { $0.id == listener || $0.name == listener }) {
                    Console.output(Self.line(of: set))
                }
            }
        } catch {
            throw exitFailing(error, program: "broadcaster")
        }
    }

    private static func checked(_ url: String) throws(PartyCastError) -> String {
        guard let parsed = URL(string: url), parsed.scheme == "http", parsed.host != nil else {
            throw PartyCastError(.invalidArgument, "--url takes http://HOST:PORT, as `broadcaster share` prints it")
        }
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    /// The remote control of the party named `name`, or of the only party on the LAN that has one.
    private static func discover(name: String?) throws(PartyCastError) -> String {
        let found = try ServiceBrowser.browse(timeout: 2, waitingFor: name).filter { name == nil || $0.name == name }
        let controllable = found.filter { $0.txt["control"].flatMap(Int.init) != nil }
        guard let service = controllable.first else {
            if let name {
                throw PartyCastError(.io, found.isEmpty
                    ? "no party named \"\(name)\" on the LAN; `listener list` shows those there are"
                    : "\"\(name)\" has no remote control (an older broadcaster?); give --url")
            }
            throw PartyCastError(.io, "no party with a remote control found on the LAN; start one with `broadcaster share`, or give --url")
        }
        guard controllable.count == 1 else {
            let names = controllable.map { "\"" + String(untrusted: $0.name, limit: 60) + "\"" }.joined(separator: ", ")
            throw PartyCastError(.invalidArgument, "\(controllable.count) parties on the LAN (\(names)); name the one to control")
        }
        return "http://\(service.address):\(service.txt["control"]!)"
    }

    /// Proves the key to the party with SPAKE2 (role A) over two requests and returns the session
    /// token it grants. The party proves it holds the key first: if its confirmation does not verify,
    /// nothing more is sent (not even the command), and ctl exits 12.
    static func openSession(at base: String, key: PartyKey) async throws(PartyCastError) -> String {
        let remote = Spake2.Party(role: .a, key: key)
        let sessionID = Data(KeyHandshake.randomBytes(ControlSession.sessionIDBytes)).base64EncodedString()
        let challenge: ControlSession.Challenge = try await post(ControlSession.Start(sessionID: sessionID, share: Data(remote.share).base64EncodedString()),
                                                                 to: base, path: "/api/session")
        guard let share = Data(base64Encoded: challenge.share), let proof = Data(base64Encoded: challenge.confirmation),
              let confirmations = remote.finish(peerShare: [UInt8](share)), confirmations.verify([UInt8](proof)) else {
            throw PartyCastError(.key, "the party at \(base) could not prove it holds the party key (another key, or not the party you meant); sent it nothing more")
        }
        let token: ControlSession.Token = try await post(ControlSession.Confirm(sessionID: sessionID, confirmation: Data(confirmations.own).base64EncodedString()),
                                                         to: base, path: "/api/session/confirm")
        return token.token
    }

    private static func post<Answer: Decodable>(_ body: some Encodable, to base: String, path: String) async throws(PartyCastError) -> Answer {
        let (status, data) = try await exchange(.POST, base: base, path: path, body: body, bearer: nil, limit: 64 * 1024)
        guard status == .ok else { throw refusal(status, data) }
        do { return try JSONDecoder().decode(Answer.self, from: data) } catch {
            throw PartyCastError(.incompatible, "\(base + path) did not answer the key handshake; is it a PartyCast remote control of this version?")
        }
    }

    /// One request, its body as JSON; the answer's status and body, or a one-line error if the party cannot be reached.
    private static func exchange(_ method: HTTPMethod, base: String, path: String, body: (any Encodable)?, bearer: String?,
                                 limit: Int) async throws(PartyCastError) -> (HTTPResponseStatus, Data) {
        // `base` passed `checked` or came from mDNS: http://HOST[:PORT].
        guard let url = URL(string: base), let host = url.host else { throw PartyCastError(.invalidArgument, "\(base) is not http://HOST:PORT") }
        let port = url.port ?? 80
        var headers = HTTPHeaders()
        if let bearer { headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        do {
            var payload: [ByteBuffer] = []
            if let body {
                headers.add(name: "Content-Type", value: "application/json")
                payload = [ByteBuffer(bytes: try JSONEncoder().encode(body))]
            }
            let answer = try await ControlClient.perform(method, host: host, port: port, path: path, headers: headers, body: payload, limit: limit)
            return (answer.status, Data(buffer: answer.body))
        } catch {
            let failure = switch error {
            case ControlClient.Failure.refused, ControlClient.Failure.cannotConnect: ": \(error)"  // it names the address
            default: " at \(base): \(error)"
            }
            throw PartyCastError(.io, "cannot reach the party's remote control\(failure)")
        }
    }

    /// A 4xx or 5xx answer as the error ctl exits with.
    private static func refusal(_ status: HTTPResponseStatus, _ data: Data) -> PartyCastError {
        let message = (try? JSONDecoder().decode(ControlErrorBody.self, from: data)).map { String(untrusted: $0.error, limit: 300) }
            ?? "HTTP \(status.code) \(status.reasonPhrase)"
        let code: PartyCastError.Code = switch status.code {
        case 401, 403: .key
        case 400..<500: .invalidArgument
        default: .io
        }
        return PartyCastError(code, message)
    }

    /// Sends the request; the party's answer is its new state, or a refusal whose message becomes the error.
    private static func send(_ request: Request, to base: String, bearer: String?) async throws(PartyCastError) -> PartySnapshot {
        let (status, data) = try await exchange(request.method, base: base, path: request.path, body: request.body, bearer: bearer, limit: 4 << 20)
        guard status == .ok else { throw refusal(status, data) }
        do { return try JSONDecoder().decode(PartySnapshot.self, from: data) } catch {
            throw PartyCastError(.incompatible, "\(base) did not answer with a party's state; is it a PartyCast remote control?")
        }
    }

    private static func title(_ item: PartySnapshot.Item?) -> String {
        guard let item else { return "nothing" }
        return "\"" + String(untrusted: item.title, limit: 80) + "\"" + (item.artist.map { " by " + String(untrusted: $0, limit: 60) } ?? "")
    }

    /// What a command left the party doing, in one line.
    static func oneLine(_ s: PartySnapshot) -> String {
        let current = s.queue.first { $0.id == s.current }
        let state = s.ended ? "over" : s.paused ? "paused" : "playing"
        let position = current == nil ? "" : "  \(clockText(s.elapsedSeconds))" + (current?.durationSeconds.map { " / \(clockText($0))" } ?? "")
        return "\(state): \(title(current))\(position)  volume \(s.volume)%"
    }

    /// A listener's settings and how well it keeps up, in one line.
    static func line(of l: PartySnapshot.Listener) -> String {
        let buffer = l.bufferMilliseconds.map { "buffer \($0) ms" } ?? "buffer –"
        let sync = l.syncErrorMicroseconds.map { "sync \(String(format: "%+.1f", Double($0) / 1000)) ms" } ?? "sync –"
        let bound = l.clockBoundMicroseconds.map { "  clock ±\($0) µs" } ?? ""
        let clock = l.clockSettled == false ? (bound.isEmpty ? "  clock settling" : bound + " settling") : bound
        return "[\(String(untrusted: l.id, limit: 40))] \(String(untrusted: l.name, limit: 60)) (\(String(untrusted: l.host, limit: 60)))  "
            + "volume \(l.volume)%\(l.muted ? " muted" : "")  offset \(l.latencyOffsetMilliseconds) ms  channel \(l.channel.rawValue)  \(buffer)  \(sync)\(clock)"
    }

    static func summary(_ s: PartySnapshot) -> [String] {
        var lines = ["\(String(untrusted: s.name, limit: 80))  —  " + oneLine(s), "queue:"]
        for item in s.queue {
            lines.append("  \(item.id == s.current ? "▶" : " ") [\(item.id)] \(title(item))" + (item.durationSeconds.map { "  \(clockText($0))" } ?? ""))
        }
        lines.append("listeners: \(s.listeners.count)")
        for l in s.listeners { lines.append("  " + line(of: l)) }
        if !s.refused.isEmpty {
            lines.append("refused: " + s.refused.sorted { $0.key < $1.key }.map { "\($0.value) \(String(untrusted: $0.key, limit: 60))" }.joined(separator: ", "))
        }
        return lines
    }
}
