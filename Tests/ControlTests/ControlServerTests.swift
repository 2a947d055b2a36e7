import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import PartyCastControlSeam
import PartyCastControl
import PartyCastCore
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// The remote control's HTTP mapping, over a live server on loopback and a real HTTP client.
final class ControlServerTests: XCTestCase {
    private var party: RecordingParty!
    private var server: ControlServer!
    private let logger = Logger(label: "control-test")
    private let secret = "correct horse battery"

    override func setUp() async throws {
        party = RecordingParty()
        server = try await ControlServer(control: party, host: "127.0.0.1", port: 0, key: nil, logger: logger)
    }

    override func tearDown() async throws {
        await server.stop()
    }

    // MARK: - Commands

    func testStatusAndLibrary() async throws {
        let status = try await call(.GET, "/api/status")
        XCTAssertEqual(status.status, 200)
        XCTAssertEqual(status.contentType, "application/json")
        XCTAssertEqual(try status.snapshot(), party.snapshot)
        let library = try await call(.GET, "/api/library")
        XCTAssertEqual(try JSONDecoder().decode([LibraryEntry].self, from: library.body), party.library)
        XCTAssertEqual(party.performed, [], "reading is not a command")
    }

    func testEveryCommandRouteReachesThePartyAndAnswersTheNewSnapshot() async throws {
        let routes: [(HTTPMethod, String, String?, PartyCommand)] = [
            (.POST, "/api/pause", nil, .pause),
            (.POST, "/api/resume", nil, .resume),
            (.POST, "/api/next", nil, .next),
            (.POST, "/api/previous", nil, .previous),
            (.POST, "/api/seek", #"{"seconds": 42.5}"#, .seek(seconds: 42.5)),
            (.POST, "/api/queue", #"{"path": "music/two.mp3"}"#, .add(path: "music/two.mp3")),
            (.POST, "/api/queue/2/move", #"{"index": 0}"#, .move(item: 2, index: 0)),
            (.POST, "/api/queue/3/play", nil, .play(item: 3)),
            (.DELETE, "/api/queue/2", nil, .remove(item: 2)),
            (.PUT, "/api/volume", #"{"percent": 35}"#, .partyVolume(percent: 35)),
            (.PUT, "/api/listeners/L1/volume", #"{"percent": 55}"#, .listenerVolume(listener: "L1", percent: 55)),
            (.PUT, "/api/listeners/Living%20Room/volume", #"{"percent": 20}"#, .listenerVolume(listener: "Living Room", percent: 20)),
            (.PUT, "/api/listeners/L2/mute", #"{"muted": true}"#, .mute(listener: "L2", muted: true)),
            (.PUT, "/api/listeners/L1/latency-offset", #"{"milliseconds": -150}"#, .latencyOffset(listener: "L1", milliseconds: -150)),
            (.PUT, "/api/listeners/L2/channel", #"{"channel": "right"}"#, .channel(listener: "L2", .right)),
            (.PUT, "/api/tone", #"{"hertz": 880.5}"#, .tone(hertz: 880.5)),
            (.POST, "/api/listeners/L2/identify", nil, .identify(listener: "L2")),
        ]
        var revision = party.snapshot.revision
        for (method, path, body, _) in routes {
            let answer = try await call(method, path, body: body)
            XCTAssertEqual(answer.status, 200, "\(method) \(path): \(answer.text)")
            let snapshot = try answer.snapshot()
            XCTAssertGreaterThan(snapshot.revision, revision, "\(path) answers the snapshot after the command")
            XCTAssertEqual(snapshot, party.snapshot)
            revision = snapshot.revision
        }
        XCTAssertEqual(party.performed, routes.map(\.3))
        let final = party.snapshot
        XCTAssertEqual(final.volume, 35)
        XCTAssertEqual(final.current, 3)
        XCTAssertEqual(final.queue.map(\.id), [1, 3, 100])
        XCTAssertEqual(final.listeners.map(\.volume), [55, 20, 60, 60])
        XCTAssertEqual(final.listeners[1].muted, true)
        XCTAssertEqual(final.listeners[0].latencyOffsetMilliseconds, -150)
        XCTAssertEqual(final.listeners.map(\.channel), [.stereo, .right, .stereo, .stereo])
        XCTAssertEqual(final.toneHertz, 880.5)
        // The snapshot names the channel as the route takes it.
        let answer = try await call(.GET, "/api/status")
        let status = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
        XCTAssertEqual((status?["listeners"] as? [[String: Any]])?.compactMap { $0["channel"] as? String }, ["stereo", "right", "stereo", "stereo"])
    }

    // MARK: - Refusals

    func testThePartysRefusalsAnswer4xxWithItsMessage() async throws {
        let cases: [(HTTPMethod, String, String?, Int, String)] = [
            (.PUT, "/api/listeners/Nobody/volume", #"{"percent": 50}"#, 404, "no listener \"Nobody\""),
            (.PUT, "/api/listeners/ghost/mute", #"{"muted": true}"#, 404, "no listener \"ghost\""),
            (.PUT, "/api/listeners/ghost/channel", #"{"channel": "left"}"#, 404, "no listener \"ghost\""),
            (.POST, "/api/listeners/ghost/identify", nil, 404, "no listener \"ghost\""),
            (.POST, "/api/seek", #"{"seconds": 999}"#, 400, "past the end"),
            (.POST, "/api/seek", #"{"seconds": -1}"#, 400, "past the end"),
            (.POST, "/api/queue", #"{"path": "/etc/passwd"}"#, 404, "no such file: /etc/passwd"),
            (.DELETE, "/api/queue/77", nil, 404, "no queue item 77"),
            (.POST, "/api/queue/77/play", nil, 404, "no queue item 77"),
            (.POST, "/api/queue/2/move", #"{"index": 9}"#, 400, "outside the queue"),
            (.PUT, "/api/volume", #"{"percent": 101}"#, 400, "outside 0…100"),
            (.PUT, "/api/listeners/Garden/volume", #"{"percent": 10}"#, 409, "2 listeners are named \"Garden\""),
            (.PUT, "/api/listeners/L1/latency-offset", #"{"milliseconds": 5000}"#, 400, "outside −2000…2000"),
            (.POST, "/api/resume", nil, 400, "not paused"),
            (.PUT, "/api/tone", #"{"hertz": 30000}"#, 400, "between 0 and 24000 Hz"),
        ]
        let before = party.snapshot
        for (method, path, body, status, message) in cases {
            let answer = try await call(method, path, body: body)
            XCTAssertEqual(answer.status, status, "\(method) \(path): \(answer.text)")
            XCTAssertEqual(answer.contentType, "application/json")
            XCTAssertTrue(try answer.error().contains(message), "\(path): \(answer.text)")
        }
        XCTAssertEqual(party.performed.count, cases.count, "each refusal came from the party, not the HTTP layer")
        XCTAssertEqual(party.snapshot, before, "the party plays on unchanged")
    }

    func testMalformedBodiesNeverReachTheParty() async throws {
        let cases: [(String, String, String)] = [
            ("/api/seek", "{", "not JSON"),
            ("/api/seek", "", "not JSON"),
            ("/api/seek", "null", "must be a JSON object"),
            ("/api/seek", "42", "must be a JSON object"),
            ("/api/seek", #"{"seconds": "soon"}"#, "\"seconds\" must be a number"),
            ("/api/seek", #"{"second": 3}"#, "missing field \"seconds\""),
            ("/api/seek", #"{"seconds": null}"#, "\"seconds\" must be a number, not null"),
            ("/api/queue", #"{"path": 7}"#, "\"path\" must be a string"),
            ("/api/queue", "[]", "must be a JSON object"),
            ("/api/queue/2/move", #"{"index": 1.5}"#, "a whole number"),
            ("/api/queue/abc/move", #"{"index": 1}"#, "whole number"),
        ]
        for (path, body, message) in cases {
            let answer = try await call(.POST, path, body: body)
            XCTAssertEqual(answer.status, 400, "\(path) \(body): \(answer.text)")
            XCTAssertTrue(try answer.error().contains(message), "\(path) \(body): \(answer.text)")
        }
        let mute = try await call(.PUT, "/api/listeners/L1/mute", body: #"{"muted": "yes"}"#)
        XCTAssertEqual(mute.status, 400)
        XCTAssertEqual(try mute.error(), "\"muted\" must be true or false")
        for body in [#"{"channel": "sideways"}"#, #"{"channel": "LEFT"}"#, #"{"channel": 2}"#, #"{}"#] {
            let channel = try await call(.PUT, "/api/listeners/L1/channel", body: body)
            XCTAssertEqual(channel.status, 400, body)
            XCTAssertTrue(try channel.error().contains("\"channel\""), "\(body): \(channel.text)")
        }
        let sideways = try await call(.PUT, "/api/listeners/L1/channel", body: #"{"channel": "sideways"}"#)
        XCTAssertEqual(try sideways.error(), "\"channel\" is not valid: it takes stereo|left|right|mono")
        let volume = try await call(.PUT, "/api/volume", body: #"{"percent": 50.5}"#)
        XCTAssertEqual(volume.status, 400)
        XCTAssertEqual(party.performed, [])
    }

    func testAHugeBodyIs413WithOrWithoutALength() async throws {
        let huge = #"{"path": ""# + String(repeating: "a", count: 1 << 20) + #""}"#
        let sized = try await call(.POST, "/api/queue", body: huge)
        XCTAssertEqual(sized.status, 413)
        XCTAssertTrue(try sized.error().contains("over 65536 bytes"))

        let chunks = (0..<32).map { _ in ByteBuffer(repeating: UInt8(ascii: " "), count: 8192) }
        let response = try await ControlClient.perform(.POST, host: "127.0.0.1", port: server.port, path: "/api/queue", body: chunks, chunked: true)
        XCTAssertEqual(response.status.code, 413)
        XCTAssertEqual(try JSONDecoder().decode(ControlErrorBody.self, from: Data(buffer: response.body)).error, "the body is over 65536 bytes")
        XCTAssertEqual(party.performed, [])
    }

    func testUnknownRoutesAndWrongMethodsAnswerJSON() async throws {
        for (method, path, status) in [(HTTPMethod.GET, "/api/nope", 404), (.POST, "/api/status/extra", 404), (.GET, "/nothing-here", 404),
                                       (.GET, "/api/pause", 405), (.DELETE, "/api/volume", 405), (.POST, "/api/status", 405),
                                       (.TRACE, "/api/queue/1/play", 405), (.GET, "/api/events", 426)] {
            let answer = try await call(method, path)
            XCTAssertEqual(answer.status, status, "\(method) \(path): \(answer.text)")
            XCTAssertEqual(answer.contentType, "application/json", "\(method) \(path)")
            XCTAssertFalse(try answer.error().isEmpty)
        }
        let put = try await call(.PUT, "/api/queue/1/move")
        XCTAssertEqual(try put.error(), "/api/queue/{id}/move takes POST only")
        XCTAssertEqual(put.headers["Allow"].first, "POST")
        XCTAssertEqual(party.performed, [])
    }

    // MARK: - Cover art and the page

    func testCoverIsServedWithASafeType() async throws {
        let png = try await call(.GET, "/api/items/1/cover")
        XCTAssertEqual(png.status, 200)
        XCTAssertEqual(png.contentType, "image/png")
        XCTAssertEqual(Array(png.body), party.covers[1]!.bytes)
        let html = try await call(.GET, "/api/items/3/cover")
        XCTAssertEqual(html.contentType, "application/octet-stream", "a tag's claimed type is not trusted to render")
        XCTAssertEqual(html.headers["X-Content-Type-Options"].first, "nosniff")
        let none = try await call(.GET, "/api/items/2/cover")
        XCTAssertEqual(none.status, 404)
        XCTAssertEqual(try none.error(), "item 2 has no cover picture")
    }

    func testThePageAndTheAPIDescriptionAreServed() async throws {
        let page = try await call(.GET, "/")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(page.headers["Content-Security-Policy"].first?.contains("default-src 'self'"), true)
        for id in ["id=\"pause\"", "id=\"next\"", "id=\"previous\"", "id=\"seek\"", "id=\"title\"", "id=\"listeners\"", "id=\"queue\""] {
            XCTAssertTrue(page.text.contains(id), id)
        }
        for (path, type) in [("/app.js", "text/javascript"), ("/style.css", "text/css"), ("/openapi.yaml", "application/yaml"),
                             ("/favicon.svg", "image/svg+xml")] {
            let file = try await call(.GET, path)
            XCTAssertEqual(file.status, 200, path)
            XCTAssertTrue(file.contentType?.hasPrefix(type) == true, path)
        }
        let spec = try await call(.GET, "/openapi.yaml")
        for route in ["/api/status:", "/api/seek:", "/api/queue/{id}/move:", "/api/listeners/{id}/latency-offset:", "/api/items/{id}/cover:", "/api/events:"] {
            XCTAssertTrue(spec.text.contains(route), route)
        }
    }

    // MARK: - Private party

    func testAPrivatePartyWantsATokenOnEveryAPIRoute() async throws {
        try await restart(key: PartyKey(secret: secret))
        for route in [(HTTPMethod.GET, "/api/status"), (.POST, "/api/pause"), (.GET, "/api/items/1/cover"), (.GET, "/api/library")] {
            let bare = try await call(route.0, route.1)
            XCTAssertEqual(bare.status, 401, route.1)
            XCTAssertTrue(try bare.error().contains("private"))
            let key = try await call(route.0, route.1, headers: ["Authorization": "Bearer \(secret)"])
            XCTAssertEqual(key.status, 401, "the key itself is no Bearer: \(route.1)")
        }
        XCTAssertEqual(party.performed, [], "nothing ran without a token")
        let token = try await remote.token(key: secret)
        let basic = try await call(.POST, "/api/pause", headers: ["Authorization": "Basic \(token)"])
        XCTAssertEqual(basic.status, 401)
        let right = try await call(.POST, "/api/pause", headers: ["Authorization": "Bearer \(token)"])
        XCTAssertEqual(right.status, 200)
        XCTAssertEqual(party.performed, [.pause])
        let lowercase = try await call(.POST, "/api/resume", headers: ["Authorization": "bearer \(token)"])
        XCTAssertEqual(lowercase.status, 200, "the scheme is case-insensitive")
        let page = try await call(.GET, "/")
        XCTAssertEqual(page.status, 200, "the page itself asks for the key")
    }

    /// Another site's page, open in a browser on the LAN, must not drive a public party.
    func testAnotherSitesPageIsRefused() async throws {
        let refused = try await call(.POST, "/api/pause", headers: ["Origin": "http://evil.example"])
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(try refused.error(), "a request from another site's page is refused")
        XCTAssertEqual(party.performed, [])
        let own = try await call(.POST, "/api/pause", headers: ["Origin": "http://127.0.0.1:\(server.port)"])
        XCTAssertEqual(own.status, 200)
    }

    // MARK: - WebSocket

    func testTheWebSocketPushesEveryChange() async throws {
        let remote = remote
        // Each change once the last one was heard: a change made while the one before it is still
        // queued replaces it (the socket holds the newest snapshot only, for a slow remote).
        let received = try await webSocket(firstMessage: nil, count: 3) { heard in
            if heard == 1 { try await remote.call(.POST, "/api/pause").succeeded() }
            if heard == 2 { try await remote.call(.PUT, "/api/volume", body: #"{"percent": 12}"#).succeeded() }
        }
        let snapshots = try received.messages.map { try JSONDecoder().decode(PartySnapshot.self, from: Data($0.utf8)) }
        XCTAssertEqual(snapshots.map(\.revision), [1, 2, 3])
        XCTAssertEqual(snapshots.map(\.paused), [false, true, true])
        XCTAssertEqual(snapshots.last?.volume, 12)
        XCTAssertTrue(waitUntil(timeout: 2) { self.party.watcherCount == 0 })
    }

    func testAPrivatePartysWebSocketWantsATokenFirst() async throws {
        try await restart(key: PartyKey(secret: secret))
        let refused = try await webSocket(firstMessage: #"{"token": "not a token"}"#, count: 1)
        XCTAssertEqual(refused.messages, [])
        XCTAssertEqual(refused.close, .policyViolation)
        let key = try await webSocket(firstMessage: #"{"token": "\#(secret)"}"#, count: 1)
        XCTAssertEqual(key.messages, [], "the key itself is no token")
        let silent = try await webSocket(firstMessage: #"hello"#, count: 1)
        XCTAssertEqual(silent.messages, [])

        let remote = remote
        let token = try await remote.token(key: secret)
        let accepted = try await webSocket(firstMessage: #"{"token": "\#(token)"}"#, count: 2) { heard in
            if heard == 1 { try await remote.call(.POST, "/api/next", headers: ["Authorization": "Bearer \(token)"]).succeeded() }
        }
        let snapshots = try accepted.messages.map { try JSONDecoder().decode(PartySnapshot.self, from: Data($0.utf8)) }
        XCTAssertEqual(snapshots.map(\.current), [1, 2])
    }

    // MARK: - broadcaster ctl

    /// The real command line against the live server: the party's answers, its refusals' messages
    /// as one line, and the exit statuses scripts can rely on.
    func testCtlDrivesTheRemoteAndExitsByTheAnswer() async throws {
        let url = "http://127.0.0.1:\(server.port)"
        func ctl(_ arguments: String..., environment: [String: String]? = nil) throws -> ProcessResult {
            try runProcess(productPath("broadcaster"), ["ctl", "--url", url] + arguments, timeout: 30, environment: environment)
        }
        var result = try ctl("pause")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "paused: \"First Song\" by Artist A  00:12 / 03:00  volume 100%\n")
        result = try ctl("volume", "Living Room", "30")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("paused: "), result.stdout)
        XCTAssertTrue(result.stdout.contains("\n[L2] Living Room (lounge)  volume 30%  offset"), "the listener's line too:\n\(result.stdout)")
        XCTAssertEqual(try ctl("volume", "45%").status, 0)
        XCTAssertEqual(try ctl("seek", "61").status, 0)
        XCTAssertEqual(try ctl("add", "music/one.mp3").status, 0)
        XCTAssertEqual(try ctl("unmute", "L3").status, 0)
        XCTAssertEqual(try ctl("next").status, 0)
        XCTAssertEqual(try ctl("channel", "Kitchen", "left").status, 0)
        XCTAssertEqual(party.performed, [.pause, .listenerVolume(listener: "Living Room", percent: 30), .partyVolume(percent: 45),
                                         .seek(seconds: 61), .add(path: "music/one.mp3"), .mute(listener: "L3", muted: false), .next,
                                         .channel(listener: "Kitchen", .left)])

        result = try ctl("status")
        XCTAssertEqual(result.status, 0, result.stderr)
        for line in ["Test Party", "queue:", "▶ [2] \"Second Song\" by Artist B", "[L1] Kitchen (kitchen)  volume 80%  offset 0 ms  channel left  ",
                     "[L3] Garden (garden-a)  volume 60%  offset", "channel stereo"] {
            XCTAssertTrue(result.stdout.contains(line), "\(line) in:\n\(result.stdout)")
        }

        result = try ctl("seek", "999")
        XCTAssertEqual(result.status, 10)
        XCTAssertEqual(result.stderr, "broadcaster: error [invalid-argument]: 999.0 s is past the end of \"Second Song\" (200 s)\n")
        result = try ctl("mute", "ghost")
        XCTAssertEqual(result.status, 10)
        XCTAssertEqual(result.stderr, "broadcaster: error [invalid-argument]: no listener \"ghost\"\n")
        XCTAssertEqual(try ctl("volume", "Garden", "5").status, 10, "an ambiguous name")
        XCTAssertEqual(try ctl("frobnicate").status, 64, "a usage error, before any request")
        XCTAssertEqual(try ctl("seek").status, 64)
        let sideways = try ctl("channel", "Kitchen", "sideways")
        XCTAssertEqual(sideways.status, 64, "a channel ctl does not know is a usage error")
        XCTAssertTrue(sideways.stderr.contains("sideways is not a channel: stereo|left|right|mono"), sideways.stderr)
        XCTAssertEqual(try ctl("channel", "Kitchen").status, 64)

        let closed = freePort()
        let nobody = try runProcess(productPath("broadcaster"), ["ctl", "--url", "http://127.0.0.1:\(closed)", "pause"], timeout: 30)
        XCTAssertEqual(nobody.status, 7)
        XCTAssertEqual(nobody.stderr, "broadcaster: error [io]: cannot reach the party's remote control: nothing listens at 127.0.0.1:\(closed) (connection refused)\n")

        try await restart(key: PartyKey(secret: secret))
        let url2 = "http://127.0.0.1:\(server.port)"
        let locked = try runProcess(productPath("broadcaster"), ["ctl", "--url", url2, "pause"], timeout: 30)
        XCTAssertEqual(locked.status, 12)
        XCTAssertTrue(locked.stderr.contains("this party is private"), locked.stderr)
        let wrong = try runProcess(productPath("broadcaster"), ["ctl", "--url", url2, "--key", "not the key", "status"], timeout: 30)
        XCTAssertEqual(wrong.status, 12)
        let keyed = try runProcess(productPath("broadcaster"), ["ctl", "--url", url2, "resume"], timeout: 30, environment: ["PARTYCAST_KEY": secret])
        XCTAssertEqual(keyed.status, 0, keyed.stderr)
        XCTAssertEqual(party.performed.last, .resume)
    }

    // MARK: - Lifecycle

    func testABusyPortIsAOneLineError() async throws {
        do {
            let second = try await ControlServer(control: party, host: "127.0.0.1", port: server.port, key: nil, logger: logger)
            XCTFail("a second server bound port \(second.port)")
            await second.stop()
        } catch {
            XCTAssertEqual(error.code, .io)
            XCTAssertTrue(error.message.contains("127.0.0.1:\(server.port)"), error.message)
            XCTAssertTrue(error.message.lowercased().contains("in use"), error.message)
            XCTAssertFalse(error.message.contains("\n"))
        }
    }

    func testShutdownClosesAnOpenWebSocketPromptly() async throws {
        let port = server.port
        let closed = expectation(description: "the client saw the socket close")
        let client = Task {
            _ = try await EventsSocket.run(port: port) { _ in true }
            closed.fulfill()
        }
        XCTAssertTrue(waitUntil(timeout: 2) { self.party.watcherCount == 1 })
        let started = Date()
        await server.stop()
        XCTAssertLessThan(Date().timeIntervalSince(started), 3.5)
        await fulfillment(of: [closed], timeout: 5)
        _ = try await client.value
        XCTAssertTrue(waitUntil(timeout: 2) { self.party.watcherCount == 0 })
        server = try await ControlServer(control: party, host: "127.0.0.1", port: 0, key: nil, logger: logger)  // for tearDown
    }

    // MARK: - Helpers

    private var remote: Remote { Remote(port: server.port) }

    private func call(_ method: HTTPMethod, _ path: String, body: String? = nil, headers: [String: String] = [:]) async throws -> Answer {
        try await remote.call(method, path, body: body, headers: headers)
    }

    private func restart(key: PartyKey?) async throws {
        await server.stop()
        server = try await ControlServer(control: party, host: "127.0.0.1", port: 0, key: key, logger: logger)
    }

    /// Connects to /api/events, sends `firstMessage`, and collects text messages until `count` came
    /// or the server closed; `then` runs after each message, with how many have come.
    private func webSocket(firstMessage: String?, count: Int, then: @escaping @Sendable (Int) async throws -> Void = { _ in }) async throws
        -> (messages: [String], close: WebSocketErrorCode?) {
        let collected = MessageBox()
        let port = server.port
        let seconds = 10.0
        do {
            let close = try await withTimeout(seconds: seconds) {
                try await EventsSocket.run(port: port, first: firstMessage) { text in
                    try await then(await collected.append(text))
                    return await collected.count < count
                }
            }
            return (await collected.messages, close)
        } catch is TimedOut {
            throw HeardTooFew(expected: count, seconds: seconds, heard: await collected.messages)
        }
    }

}

/// A client of one server: Sendable, for the closures that run beside a WebSocket.
struct Remote: Sendable {
    let port: Int

    func call(_ method: HTTPMethod, _ path: String, body: String? = nil, headers: [String: String] = [:]) async throws -> Answer {
        var fields = HTTPHeaders(headers.map { ($0.key, $0.value) })
        if body != nil { fields.add(name: "Content-Type", value: "application/json") }
        let answer = try await ControlClient.perform(method, host: "127.0.0.1", port: port, path: path, headers: fields,
                                                     body: body.map { [ByteBuffer(string: $0)] } ?? [])
        return Answer(status: Int(answer.status.code), headers: answer.headers, body: Data(buffer: answer.body))
    }
}

struct Answer {
    var status: Int
    var headers: HTTPHeaders
    var body: Data
    var contentType: String? { headers["Content-Type"].first }
    var text: String { String(decoding: body, as: UTF8.self) }
    func snapshot() throws -> PartySnapshot { try JSONDecoder().decode(PartySnapshot.self, from: body) }
    func error() throws -> String { try JSONDecoder().decode(ControlErrorBody.self, from: body).error }
    /// Throws unless the party took the command (2xx).
    func succeeded() throws { guard (200..<300).contains(status) else { throw UnexpectedAnswer(answer: self) } }
}

private actor MessageBox {
    var messages: [String] = []
    var count: Int { messages.count }
    func append(_ text: String) -> Int {
        messages.append(text)
        return messages.count
    }
}

private struct TimedOut: Error {}

/// What a WebSocket that went quiet had said by then.
private struct HeardTooFew: Error, CustomStringConvertible {
    let expected: Int
    let seconds: Double
    let heard: [String]
    var description: String { "\(heard.count) of \(expected) messages within \(seconds) s: \(heard)" }
}

/// An answer other than a success, as an error that says what it was.
private struct UnexpectedAnswer: Error, CustomStringConvertible {
    let answer: Answer
    var description: String { "answered \(answer.status): \(answer.text)" }
}

func withTimeout<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await letTimePass(seconds)
            throw TimedOut()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
