import PartyCastBroadcast
import PartyCastCLI
import PartyCastCore
import ServiceLifecycle

/// On a terminal, once a second until the graceful shutdown: redraws name, address, progress and
/// every listener (name, host, buffer health, measured sync error). Without a terminal there is none:
/// joins and leaves are logged as they happen, one line each.
struct StatusDisplay: Service {
    let name: String
    let endpoint: String
    let party: Party
    let fanout: Fanout

    func run() async throws {
        defer { Console.endStatus() }
        while !Task.isCancelled {
            // Ends at the graceful shutdown (a CancellationError), as at a plain cancellation.
            do { try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) } } catch { return }
            Console.status(lines())
        }
    }

    private func lines() -> [String] {
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
            let bound = peer.clockBoundMicroseconds.map { "  clock ±\($0) µs" } ?? ""
            let clock = peer.clockSettled == false ? (bound.isEmpty ? "  clock settling" : bound + " settling") : bound
            lines.append("    \(peer.name) @ \(peer.host) (\(peer.address))  \(buffer)  \(sync)\(clock)" + (peer.skippedChunks > 0 ? "  skipped \(peer.skippedChunks)" : ""))
        }
        return lines
    }
}
