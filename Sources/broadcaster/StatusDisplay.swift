import PartyCastBroadcast
import PartyCastCLI
import PartyCastCore
import Synchronization

/// Once a second: runs `everySecond` (the mDNS listener count) and, on a terminal, redraws name, address, progress and every listener (name, host,
/// buffer health, measured sync error); elsewhere it stays quiet (joins and leaves are logged as they happen).
/// Every 100 ms it turns Ctrl-C into a clean stop.
final class StatusDisplay {
    private let done: StopFlag
    private let thread: DedicatedThread

    init(name: String, endpoint: String, party: Party, fanout: Fanout, everySecond: @escaping @Sendable () -> Void) {
        let terminal = Console.isTerminal
        let done = StopFlag()
        self.done = done
        thread = DedicatedThread {
            var tick = 0
            while !done.isSet {
                if interrupted.load(ordering: .relaxed) { party.stop() }
                sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 100_000_000)
                tick += 1
                guard tick % 10 == 0 else { continue }
                everySecond()
                guard terminal else { continue }
                let now = party.snapshot
                var lines = ["\(now.paused ? "⏸" : "▶") \(name)  \(endpoint)"]
                if let current = now.current, let index = now.queue.firstIndex(where: { $0.id == current }) {
                    let item = now.queue[index]
                    lines.append("  #\(index + 1) \(item.title)  \(clockText(now.elapsedSeconds))" + (item.durationSeconds.map { " / \(clockText($0))" } ?? ""))
                }
                let peers = fanout.peers
                lines.append("  \(peers.count) listener(s)")
                for peer in peers {
                    let buffer = peer.bufferMilliseconds.map { "buffer \($0) ms" } ?? "buffer ?"
                    let sync = peer.syncErrorMicroseconds.map { "sync \($0 >= 0 ? "+" : "")\($0) µs" } ?? "sync –"
                    let clock = peer.clockBoundMicroseconds.map { "  clock ±\($0) µs" } ?? ""
                    lines.append("    \(peer.name) @ \(peer.host) (\(peer.address))  \(buffer)  \(sync)\(clock)" + (peer.skippedChunks > 0 ? "  skipped \(peer.skippedChunks)" : ""))
                }
                Console.status(lines)
            }
        }
    }

    func finish() {
        done.set()
        thread.join()
        Console.endStatus()
    }
}

/// A flag one thread raises and another polls.
final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    func set() { raised.store(true, ordering: .releasing) }
    var isSet: Bool { raised.load(ordering: .acquiring) }
}
