import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import PartyCastControlSeam
import PartyCastCore
import PartyCastWebServer
import PartyCastWire

/// The bodies the API takes, shared with `broadcaster ctl` so both sides agree on the field names.
public enum ControlRequest {
    public struct Seek: Codable, Sendable { public var seconds: Double; public init(seconds: Double) { self.seconds = seconds } }
    public struct Add: Codable, Sendable { public var path: String; public init(path: String) { self.path = path } }
    public struct Move: Codable, Sendable { public var index: Int; public init(index: Int) { self.index = index } }
    public struct Volume: Codable, Sendable { public var percent: Int; public init(percent: Int) { self.percent = percent } }
    public struct Mute: Codable, Sendable { public var muted: Bool; public init(muted: Bool) { self.muted = muted } }
    public struct LatencyOffset: Codable, Sendable {
        public var milliseconds: Int
        public init(milliseconds: Int) { self.milliseconds = milliseconds }
    }
    public struct Channel: Codable, Sendable {
        public var channel: ChannelAssignment
        public init(channel: ChannelAssignment) { self.channel = channel }
    }
    public struct Tone: Codable, Sendable { public var hertz: Double; public init(hertz: Double) { self.hertz = hertz } }
    /// The WebSocket's first message on a private party: a token from the key handshake.
    public struct Token: Codable, Sendable { public var token: String; public init(token: String) { self.token = token } }
}

/// Every 4xx answer's body.
public struct ControlErrorBody: Codable, Sendable, Equatable {
    public var error: String
    public init(error: String) { self.error = error }
}

/// A refusal with its status, turned into a JSON answer by `JSONErrors`.
struct APIError: Error {
    var status: HTTPResponse.Status
    var message: String
    var headers: HTTPFields

    init(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.message = message
        self.headers = headers
    }

    init(_ refusal: PartyCommandError) {
        let status: HTTPResponse.Status = switch refusal.kind {
        case .notFound: .notFound
        case .invalid: .badRequest
        case .ambiguous: .conflict
        case .failed: .internalServerError
        }
        self.init(status, refusal.message)
    }
}

/// The routes, over one `PartyControl`.
struct ControlAPI: Sendable {
    /// Every body the API takes is a few dozen bytes; anything near this is not a remote's.
    static let maxBodyBytes = 64 * 1024
    let control: any PartyControl
    let key: PartyKey?
    let pages: WebPages
    let names: OwnNames
    let refusals: Refusals
    /// Unconfirmed key handshakes per address: each is one online guess of the key.
    let throttle = KeyGuessThrottle()
    let commandRate = CommandRate()
    let sessions = ControlSessions()

    func router() -> Router<ControlContext> {
        let router = Router(context: ControlContext.self)
        router.add(middleware: JSONErrors())
        // Before anything else, the page included: a rebound name must not even read the page.
        router.add(middleware: HostCheck(names: names, refusals: refusals))
        for page in pages.paths {
            router.get(RouterPath(page)) { _, _ in try pages.response(for: page) }
        }
        let api = router.group("api")
        api.add(middleware: SameOrigin(refusals: refusals))
        // Every route's methods, so another method on a known path answers 405 rather than 404.
        var methods: [String: [HTTPRequest.Method]] = [:]
        // The key handshake, before BearerToken: it is how a remote gets a token without the key.
        let handshake = api.group("session")
        methods["session"] = [.post]
        methods["session/confirm"] = [.post]
        handshake.post { request, context in try await startSession(request, context) }
        handshake.post("confirm") { request, context in try await confirmSession(request, context) }
        api.add(middleware: BearerToken(isPrivate: key != nil, sessions: sessions))
        api.add(middleware: CommandRateLimit(rate: commandRate, refusals: refusals))
        func add(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping @Sendable (Request, ControlContext) async throws -> Response) {
            methods[path, default: []].append(method)
            api.on(RouterPath(path), method: method, use: handler)
        }
        add(.get, "status") { _, _ in try json(control.snapshot) }
        add(.get, "library") { _, _ in try json(control.library) }
        add(.post, "pause") { _, _ in try await perform(.pause) }
        add(.post, "resume") { _, _ in try await perform(.resume) }
        add(.post, "next") { _, _ in try await perform(.next) }
        add(.post, "previous") { _, _ in try await perform(.previous) }
        add(.post, "seek") { request, _ in
            let body = try await decode(ControlRequest.Seek.self, request)
            guard body.seconds.isFinite else { throw APIError(.badRequest, "seconds must be a finite number") }
            return try await perform(.seek(seconds: body.seconds))
        }
        add(.post, "queue") { request, _ in try await perform(.add(path: decode(ControlRequest.Add.self, request).path)) }
        add(.delete, "queue/:id") { _, context in try await perform(.remove(item: itemID(context))) }
        add(.post, "queue/:id/move") { request, context in
            let id = try itemID(context)
            return try await perform(.move(item: id, index: decode(ControlRequest.Move.self, request).index))
        }
        add(.post, "queue/:id/play") { _, context in try await perform(.play(item: itemID(context))) }
        add(.put, "volume") { request, _ in try await perform(.partyVolume(percent: decode(ControlRequest.Volume.self, request).percent)) }
        add(.put, "tone") { request, _ in
            let body = try await decode(ControlRequest.Tone.self, request)
            guard body.hertz.isFinite else { throw APIError(.badRequest, "hertz must be a finite number") }
            return try await perform(.tone(hertz: body.hertz))
        }
        add(.put, "listeners/:id/volume") { request, context in
            let id = try listenerID(context)
            return try await perform(.listenerVolume(listener: id, percent: decode(ControlRequest.Volume.self, request).percent))
        }
        add(.put, "listeners/:id/mute") { request, context in
            let id = try listenerID(context)
            return try await perform(.mute(listener: id, muted: decode(ControlRequest.Mute.self, request).muted))
        }
        add(.put, "listeners/:id/latency-offset") { request, context in
            let id = try listenerID(context)
            return try await perform(.latencyOffset(listener: id, milliseconds: decode(ControlRequest.LatencyOffset.self, request).milliseconds))
        }
        add(.put, "listeners/:id/channel") { request, context in
            let id = try listenerID(context)
            return try await perform(.channel(listener: id, decode(ControlRequest.Channel.self, request).channel))
        }
        add(.post, "listeners/:id/identify") { _, context in try await perform(.identify(listener: listenerID(context))) }
        add(.get, "items/:id/cover") { _, context in
            let id = try itemID(context)
            guard let cover = control.cover(item: id) else { throw APIError(.notFound, "item \(id) has no cover picture") }
            var headers: HTTPFields = [.contentType: ControlAPI.imageType(cover.mimeType), .cacheControl: "max-age=3600"]
            headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: cover.bytes)))
        }
        // Reached only without the upgrade headers: the WebSocket router takes the real ones.
        add(.get, "events") { _, _ in throw APIError(.upgradeRequired, "/api/events is a WebSocket: connect with ws://") }
        // Added last, so it wraps only what no route took.
        router.add(middleware: MethodNotAllowed(routes: methods.map { (["api"] + $0.key.split(separator: "/").map(String.init), $0.value) }))
        return router
    }

    /// Only /api/events upgrades; it authenticates by its first message, which a browser can send
    /// where it cannot set a header.
    func webSocketRouter() -> Router<WebSocketPeerContext> {
        let router = Router(context: WebSocketPeerContext.self)
        // A refused upgrade falls through to the HTTP router, whose same checks answer 421 or 403.
        router.add(middleware: HostCheck(names: names, refusals: refusals))
        router.add(middleware: SameOrigin(refusals: refusals))
        router.ws("api/events") { inbound, outbound, context in
            var messages = inbound.messages(maxSize: 4096).makeAsyncIterator()
            if key != nil {
                // A remote that never shows a token does not get to hold the connection open.
                let deadline = Task {
                    try await Task.sleep(for: .seconds(10))
                    try await outbound.close(.policyViolation, reason: "no session token within 10 s")
                }
                defer { deadline.cancel() }
                let presented: String? = if case .text(let text)? = try await messages.next() {
                    (try? JSONDecoder().decode(ControlRequest.Token.self, from: Data(text.utf8)))?.token
                } else { nil }
                guard let presented, sessions.isValid(token: presented) else {
                    try await outbound.close(.policyViolation, reason: "this party is private: prove the key at /api/session for a token")
                    return
                }
            }
            // Pushes until the remote goes away (its inbound side ends) or the server shuts down.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await snapshot in control.snapshots() {
                        try await outbound.write(.text(ControlAPI.encode(snapshot)))
                    }
                }
                while try await messages.next() != nil {}
                group.cancelAll()
            }
        }
        return router
    }

    private func perform(_ command: PartyCommand) async throws -> Response {
        switch await control.perform(command) {
        case .success(let snapshot): try json(snapshot)
        case .failure(let refusal): throw APIError(refusal)
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ request: Request) async throws -> T {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > Self.maxBodyBytes {
            throw APIError(.contentTooLarge, "the body is over \(Self.maxBodyBytes) bytes")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: Self.maxBodyBytes) } catch is NIOTooManyBytesError {
            throw APIError(.contentTooLarge, "the body is over \(Self.maxBodyBytes) bytes")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer: body))
        } catch let error as DecodingError {
            throw APIError(.badRequest, Self.describe(error, body: Data(buffer: body)))
        }
    }

    /// POST /api/session: answers a remote's SPAKE2 share with the broadcaster's share and proof.
    /// Each answer is one online guess, throttled per address like the stream port's.
    private func startSession(_ request: Request, _ context: ControlContext) async throws -> Response {
        guard let key else { throw APIError(.notFound, "this party is public: there is no key to prove") }
        let address = context.remoteAddress?.ipAddress ?? "?"
        let (allowed, refused) = throttle.answer(address)
        guard allowed else {
            if KeyGuessThrottle.worthLogging(refused) {
                refusals.refuse(.controlKey, "remote control: refused \(refused) key handshake(s) from \(address) so far: one a second after \(KeyGuessThrottle.freeGuesses) wrong")
            }
            throw APIError(.tooManyRequests, "too many unconfirmed key handshakes from your address: one a second", headers: [.retryAfter: "1"])
        }
        guard let challenge = sessions.start(try await decode(ControlSession.Start.self, request), key: key, address: address) else {
            throw APIError(.badRequest, "not a key handshake (a 16-byte session id and a 65-byte uncompressed P-256 share, base64) with an id not in use, or too many at once")
        }
        return try json(challenge)
    }

    /// POST /api/session/confirm: a token when the remote's confirmation proves the key.
    private func confirmSession(_ request: Request, _ context: ControlContext) async throws -> Response {
        guard key != nil else { throw APIError(.notFound, "this party is public: there is no key to prove") }
        let address = context.remoteAddress?.ipAddress ?? "?"
        guard let token = sessions.confirm(try await decode(ControlSession.Confirm.self, request), address: address) else {
            refusals.refuse(.controlKey, "remote control: a key handshake from \(address) did not prove the key (\(throttle.failures(address)) unconfirmed)")
            throw APIError(.unauthorized, "the key handshake did not prove the party key (another key, or a handshake over 10 s old)")
        }
        throttle.confirmed(address)
        return try json(token)
    }

    private func itemID(_ context: ControlContext) throws -> Int {
        guard let id = context.parameters.get("id", as: Int.self) else {
            throw APIError(.badRequest, "a queue item id is a whole number")
        }
        return id
    }

    private func listenerID(_ context: ControlContext) throws -> String {
        let raw = context.parameters.get("id") ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    static func encode(_ value: some Encodable) throws -> String {
        String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    /// Picture types a browser shows; anything else a file claims is served as opaque bytes.
    static func imageType(_ claimed: String) -> String {
        let known = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp"]
        return known.contains(claimed.lowercased()) ? claimed.lowercased() : "application/octet-stream"
    }

    /// One line that names the field at fault, for the remote to show as it is.
    static func describe(_ error: DecodingError, body: Data) -> String {
        func field(_ path: [any CodingKey]) -> String { path.map(\.stringValue).joined(separator: ".") }
        switch error {
        case .keyNotFound(let key, _): return "missing field \"\(key.stringValue)\""
        case .typeMismatch(_, let context) where context.codingPath.isEmpty, .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the body must be a JSON object"
        case .typeMismatch(let type, let context): return "\"\(field(context.codingPath))\" must be \(describe(type))"
        case .valueNotFound(let type, let context): return "\"\(field(context.codingPath))\" must be \(describe(type)), not null"
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            return "\"\(field(context.codingPath))\" is not valid: \(context.debugDescription)"
        case .dataCorrupted:
            // Foundation says "not valid JSON" too for a number that does not fit its field (1.5 for a whole number).
            return (try? JSONSerialization.jsonObject(with: body, options: .fragmentsAllowed)) == nil
                ? "the body is not JSON" : "a value does not fit its field (a fraction where a whole number is wanted?)"
        @unknown default: return "the body is not what this route takes"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: "true or false"
        case is Int.Type: "a whole number"
        case is Double.Type: "a number"
        case is String.Type: "a string"
        default: "an object"
        }
    }
}

func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
    Response(status: status, headers: [.contentType: "application/json"],
             body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(value))))
}

/// Every error, ours or Hummingbird's (an unknown route, a wrong method), answers as
/// {"error": "…"} with its status; anything unexpected is a 500 that says no more.
struct JSONErrors<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            var response = try json(ControlErrorBody(error: error.message), status: error.status)
            response.headers.append(contentsOf: error.headers)
            return response
        } catch let error as HTTPError {
            let message = error.body ?? (error.status == .notFound ? "no such route: \(request.method) \(request.uri.path)" : error.status.reasonPhrase)
            return try json(ControlErrorBody(error: message), status: error.status)
        } catch {
            context.logger.error("remote control: \(request.method) \(request.uri.path) failed: \(error)")
            return try json(ControlErrorBody(error: "internal error"), status: .internalServerError)
        }
    }
}

/// Any other method on a known path (whatever the method: TRACE, QUERY…) answers 405 with `Allow`.
struct MethodNotAllowed<Context: RequestContext>: RouterMiddleware {
    /// Each route's path segments (":id" matches any one) and its methods.
    let routes: [(segments: [String], methods: [HTTPRequest.Method])]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/").map(String.init)
            guard let route = routes.first(where: { route in
                route.segments.count == segments.count && zip(route.segments, segments).allSatisfy { $0 == ":id" || $0 == $1 }
            }) else { throw error }
            let names = route.methods.map(\.rawValue).joined(separator: ", ")
            let path = "/" + route.segments.joined(separator: "/").replacingOccurrences(of: ":id", with: "{id}")
            throw APIError(.methodNotAllowed, "\(path) takes \(names) only", headers: [.allow: names])
        }
    }
}

/// Whether a browser sent this from the page itself: another site's page may not drive the party
/// (a public party's API needs no key, so a cross-site form could otherwise pause it). Clients that
/// are not browsers send no Origin.
func sameOrigin(_ request: Request) -> Bool {
    guard let origin = request.headers[.origin] else { return true }
    // A browser's Origin is its page's http(s) origin (or "null"); any other scheme (a WebSocket
    // client's ws://) is a program, which could as well send no Origin at all.
    if let scheme = origin.range(of: "://").map({ origin[..<$0.lowerBound].lowercased() }), scheme != "http" && scheme != "https" { return true }
    guard let host = request.head.authority else { return false }  // HTTP/1.1's Host, as HTTPTypes names it
    return origin == "http://\(host)" || origin == "https://\(host)"
}

struct SameOrigin<Context: RequestContext>: RouterMiddleware {
    let refusals: Refusals

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard sameOrigin(request) else {
            refusals.refuse(.foreignOrigin, "remote control: refused \(request.method) \(String(untrusted: request.uri.path, limit: 60)) "
                            + "from a page of \(String(untrusted: request.headers[.origin] ?? "", limit: 60))")
            throw APIError(.forbidden, "a request from another site's page is refused")
        }
        return try await next(request, context)
    }
}

/// A private party's routes want `Authorization: Bearer` and a token from the key handshake
/// (`/api/session`). The key itself is never taken: it does not cross the network.
struct BearerToken<Context: RequestContext>: RouterMiddleware {
    let isPrivate: Bool
    let sessions: ControlSessions

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard isPrivate else { return try await next(request, context) }
        // The scheme is case-insensitive (RFC 9110); the token is everything after its one space.
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
              sessions.isValid(token: String(header.dropFirst(7))) else {
            throw APIError(.unauthorized, "this party is private: prove the key at /api/session and send Authorization: Bearer <token>")
        }
        return try await next(request, context)
    }
}
