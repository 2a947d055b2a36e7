import PartyCastControlSeam
import PartyCastCore

/// A stand-in for `Party` that keeps the state a party would and refuses what a party would refuse
/// (unknown items, listeners and files, values out of range, ambiguous names), recording every
/// command it was asked to perform. The HTTP tests check the mapping against it; the real queue is
/// tested end to end elsewhere.
final class RecordingParty: PartyControl {
    private struct State {
        var snapshot: PartySnapshot
        var performed: [PartyCommand] = []
        var watchers: [Int: AsyncStream<PartySnapshot>.Continuation] = [:]
        var nextWatcher = 0
        var nextItem = 100
    }

    private let state: LockedValueBox<State>
    /// One file the party has read the tags of, one it has not (yet).
    let library = [LibraryEntry(path: "music/one.mp3", title: "First Song", artist: "Artist A"),
                   LibraryEntry(path: "music/two.mp3", title: "Second Song", artist: "Artist B"), LibraryEntry(path: "music/covered.mp3")]
    /// item id → picture; one claims a type a browser must not trust.
    let covers: [Int: (mimeType: String, bytes: [UInt8])] = [
        1: ("image/png", RecordingParty.png),
        3: ("text/html", Array("<script>alert(1)</script>".utf8)),
    ]

    /// An 8×8 gradient, a real PNG so the page's <img> shows it.
    static let png: [UInt8] = [
            0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x08,
            0x00, 0x00, 0x00, 0x08, 0x08, 0x02, 0x00, 0x00, 0x00, 0x4B, 0x6D, 0x29, 0xDC, 0x00, 0x00, 0x00, 0x7F, 0x49, 0x44, 0x41,
            0x54, 0x78, 0xDA, 0x0D, 0xC9, 0x31, 0x01, 0x45, 0x11, 0x00, 0x00, 0xC0, 0x57, 0x48, 0x03, 0x0D, 0x2C, 0x42, 0x58, 0x34,
            0xD0, 0xC0, 0x72, 0x21, 0x2C, 0x1A, 0x68, 0x60, 0xF9, 0x35, 0x24, 0xF1, 0xDD, 0x7A, 0xDF, 0x8D, 0x6E, 0x76, 0x8B, 0xDB,
            0x5C, 0xEE, 0x70, 0x97, 0xFB, 0xF3, 0x9D, 0xE8, 0x64, 0xA7, 0x38, 0xCD, 0xE1, 0x0C, 0x67, 0x39, 0x2F, 0x76, 0xB4, 0xB3,
            0x5D, 0xEC, 0x66, 0xB3, 0x87, 0xBD, 0xEC, 0x17, 0x33, 0x9A, 0xD9, 0x2C, 0x66, 0x33, 0x99, 0xC3, 0x5C, 0xE6, 0x8B, 0x1E,
            0xF5, 0xAC, 0x17, 0xBD, 0xE9, 0xF4, 0xA1, 0x2F, 0xFD, 0x45, 0x8D, 0x6A, 0x56, 0x8B, 0xDA, 0x54, 0xEA, 0x50, 0x97, 0xFA,
            0x22, 0x45, 0x29, 0x4B, 0x45, 0x6A, 0x12, 0x69, 0x48, 0x4B, 0x7A, 0x11, 0xA2, 0x90, 0x85, 0x22, 0x34, 0x81, 0x30, 0x84,
            0x25, 0xFC, 0xFC, 0x01, 0x93, 0x7C, 0x69, 0x01, 0x5C, 0xFC, 0x83, 0xE0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44,
            0xAE, 0x42, 0x60, 0x82,
    ]

    init() {
        var snapshot = PartySnapshot()
        snapshot.revision = 1
        snapshot.name = "Test Party"
        snapshot.current = 1
        snapshot.elapsedSeconds = 12.5
        snapshot.queue = [
            .init(id: 1, title: "First Song", artist: "Artist A", album: "Album A", durationSeconds: 180, hasCover: true),
            .init(id: 2, title: "Second Song", artist: "Artist B", durationSeconds: 200),
            // A live source: no duration.
            .init(id: 3, title: "Third Song", hasCover: true),
        ]
        snapshot.listeners = [
            .init(id: "L1", name: "Kitchen", host: "kitchen", address: "127.0.0.1", volume: 80, muted: false,
                  latencyOffsetMilliseconds: 0, bufferMilliseconds: 950, syncErrorMicroseconds: 120, clockBoundMicroseconds: 7),
            .init(id: "L2", name: "Living Room", host: "lounge", address: "127.0.0.2", volume: 100, muted: false,
                  latencyOffsetMilliseconds: 40, bufferMilliseconds: 980, syncErrorMicroseconds: -80, clockBoundMicroseconds: 35),
            .init(id: "L3", name: "Garden", host: "garden-a", address: "127.0.0.3", volume: 60, muted: true,
                  latencyOffsetMilliseconds: 0, bufferMilliseconds: nil, syncErrorMicroseconds: nil, clockBoundMicroseconds: nil),
            .init(id: "L4", name: "Garden", host: "garden-b", address: "127.0.0.4", volume: 60, muted: false,
                  latencyOffsetMilliseconds: 0, bufferMilliseconds: 900, syncErrorMicroseconds: 10, clockBoundMicroseconds: 4),
        ]
        state = LockedValueBox(State(snapshot: snapshot))
    }

    var performed: [PartyCommand] { state.withLockedValue { $0.performed } }
    var snapshot: PartySnapshot { state.withLockedValue { $0.snapshot } }
    var watcherCount: Int { state.withLockedValue { $0.watchers.count } }

    func perform(_ command: PartyCommand) async -> Result<PartySnapshot, PartyCommandError> {
        let (result, watchers) = state.withLockedValue { state in
            state.performed.append(command)
            var next = state.snapshot
            if let refusal = Self.apply(command, to: &next, nextItem: &state.nextItem, library: library) {
                return (Result<PartySnapshot, PartyCommandError>.failure(refusal), [AsyncStream<PartySnapshot>.Continuation]())
            }
            next.revision += 1
            state.snapshot = next
            return (.success(next), Array(state.watchers.values))
        }
        if case .success(let snapshot) = result { for watcher in watchers { watcher.yield(snapshot) } }
        return result
    }

    func snapshots() -> AsyncStream<PartySnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: PartySnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLockedValue { state in
            state.nextWatcher += 1
            state.watchers[state.nextWatcher] = continuation
            continuation.yield(state.snapshot)
            return state.nextWatcher
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLockedValue { _ = $0.watchers.removeValue(forKey: id) } }
        return stream
    }

    func cover(item: Int) -> (mimeType: String, bytes: [UInt8])? { covers[item] }

    private static func apply(_ command: PartyCommand, to s: inout PartySnapshot, nextItem: inout Int, library: [LibraryEntry]) -> PartyCommandError? {
        func item(_ id: Int) -> Int? { s.queue.firstIndex { $0.id == id } }
        func listener(_ name: String) -> Result<Int, PartyCommandError> {
            if let index = s.listeners.firstIndex(where: { $0.id == name }) { return .success(index) }
            let named = s.listeners.indices.filter { s.listeners[$0].name == name }
            switch named.count {
            case 0: return .failure(.init(.notFound, "no listener \"\(name)\""))
            case 1: return .success(named[0])
            default: return .failure(.init(.ambiguous, "\(named.count) listeners are named \"\(name)\"; use an id"))
            }
        }
        switch command {
        case .pause:
            if s.paused { return .init(.invalid, "already paused") }
            s.paused = true
        case .resume:
            if !s.paused { return .init(.invalid, "not paused") }
            s.paused = false
        case .next, .previous:
            guard let current = s.current, let index = item(current) else { return .init(.invalid, "nothing is playing") }
            let target = command == .next ? index + 1 : max(index - 1, 0)
            s.current = s.queue.indices.contains(target) ? s.queue[target].id : nil
            s.elapsedSeconds = 0
        case .seek(let seconds):
            guard let current = s.current, let index = item(current) else { return .init(.invalid, "nothing is playing") }
            let duration = s.queue[index].durationSeconds ?? 0
            guard seconds >= 0, seconds < duration else {
                return .init(.invalid, "\(seconds) s is past the end of \"\(s.queue[index].title)\" (\(Int(duration)) s)")
            }
            s.elapsedSeconds = seconds
        case .play(let id):
            guard item(id) != nil else { return .init(.notFound, "no queue item \(id)") }
            s.current = id
            s.elapsedSeconds = 0
        case .add(let path):
            guard library.contains(where: { $0.path == path }) else { return .init(.notFound, "no such file: \(path)") }
            s.queue.append(.init(id: nextItem, title: String(path.split(separator: "/").last ?? "")))
            nextItem += 1
        case .remove(let id):
            guard let index = item(id) else { return .init(.notFound, "no queue item \(id)") }
            s.queue.remove(at: index)
        case .move(let id, let to):
            guard let index = item(id) else { return .init(.notFound, "no queue item \(id)") }
            guard s.queue.indices.contains(to) else { return .init(.invalid, "index \(to) is outside the queue (0…\(s.queue.count - 1))") }
            s.queue.insert(s.queue.remove(at: index), at: to)
        case .partyVolume(let percent):
            guard (0...100).contains(percent) else { return .init(.invalid, "volume \(percent) is outside 0…100") }
            s.volume = percent
        case .listenerVolume(let name, let percent):
            guard (0...100).contains(percent) else { return .init(.invalid, "volume \(percent) is outside 0…100") }
            switch listener(name) {
            case .success(let index): s.listeners[index].volume = percent
            case .failure(let refusal): return refusal
            }
        case .mute(let name, let muted):
            switch listener(name) {
            case .success(let index): s.listeners[index].muted = muted
            case .failure(let refusal): return refusal
            }
        case .latencyOffset(let name, let milliseconds):
            guard (-2000...2000).contains(milliseconds) else { return .init(.invalid, "latency offset \(milliseconds) ms is outside −2000…2000") }
            switch listener(name) {
            case .success(let index): s.listeners[index].latencyOffsetMilliseconds = milliseconds
            case .failure(let refusal): return refusal
            }
        case .channel(let name, let assignment):
            switch listener(name) {
            case .success(let index): s.listeners[index].channel = assignment
            case .failure(let refusal): return refusal
            }
        case .tone(let hertz):
            guard hertz > 0, hertz < 24000 else { return .init(.invalid, "a tone's frequency must lie between 0 and 24000 Hz") }
            s.toneHertz = hertz
        case .identify(let name):
            if case .failure(let refusal) = listener(name) { return refusal }
        }
        return nil
    }
}
