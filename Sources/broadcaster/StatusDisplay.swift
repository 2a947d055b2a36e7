import PartyCastBroadcast
import PartyCastCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Once a second: runs `everySecond` (the mDNS listener count) and, on a terminal, redraws name, address, progress and every listener (name, host,
/// buffer health, measured sync error); elsewhere it stays quiet (joins and leaves are logged as they happen).
/// It also turns Ctrl-C into a clean stop.
final class StatusDisplay: @unchecked Sendable {
    // @unchecked: `thread` is set in init and joined by finish() on the same thread.
    private let done = Atomic<Bool>(false)
    private var thread: DedicatedThread?

    init(name: String, endpoint: String, broadcaster: Broadcaster, fanout: Fanout, interrupted: @escaping @Sendable () -> Bool,
         everySecond: @escaping @Sendable () -> Void) {
        let terminal = isatty(STDERR_FILENO) == 1
        thread = DedicatedThread { [self] in
            var drawnLines = 0
            var tick = 0
            while !done.load(ordering: .acquiring) {
                if interrupted() { broadcaster.stop() }
                sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 100_000_000)
                tick += 1
                guard tick % 10 == 0 else { continue }
                everySecond()
                guard terminal else { continue }
                let p = broadcaster.progress
                var lines = ["▶ \(name)  \(endpoint)",
                             "  #\(p.streamIndex + 1) \(p.title)  \(clock(p.positionSeconds))" + (p.durationSeconds.map { " / \(clock($0))" } ?? "")]
                let peers = fanout.peers
                lines.append("  \(peers.count) listener(s)")
                for peer in peers {
                    let buffer = peer.bufferMilliseconds.map { "buffer \($0) ms" } ?? "buffer ?"
                    let sync = peer.syncErrorMicroseconds.map { "sync \($0 >= 0 ? "+" : "")\($0) µs" } ?? "sync –"
                    lines.append("    \(peer.name) @ \(peer.host) (\(peer.address))  \(buffer)  \(sync)" + (peer.skippedChunks > 0 ? "  skipped \(peer.skippedChunks)" : ""))
                }
                var text = drawnLines > 0 ? "\u{1B}[\(drawnLines)F" : ""
                text += lines.map { "\u{1B}[2K" + $0 }.joined(separator: "\n") + "\n"
                text.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
                drawnLines = lines.count
            }
        }
    }

    func finish() {
        done.store(true, ordering: .releasing)
        thread?.join()
    }
}

func clock(_ seconds: Double) -> String {
    let total = Int(seconds)
    let (m, s) = (total / 60, total % 60)
    return "\(m < 10 ? "0" : "")\(m):\(s < 10 ? "0" : "")\(s)"
}
