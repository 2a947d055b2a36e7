import PartyCastCLI
import PartyCastCore
import PartyCastPlayer

/// The one-line status display on a terminal: title/artist, elapsed/duration with a bar,
/// buffer fill, party mode's sync error and the clock's own bound on its error, concealed packets and
/// state ("paused" while the party is).
/// Redrawn in place.
enum StatusLine {
    static func draw(_ s: PlayerStatus, clockBoundMicroseconds: Int?, clockSettling: Bool = false) {
        var parts: [String] = []
        let who = [s.tags.title ?? s.tags.station, s.tags.artist].compactMap { $0 }.joined(separator: " — ")
        if !who.isEmpty { parts.append("♪ \(who)") }
        let elapsed = clockText(s.positionSeconds)
        switch (s.duration, s.durationSeconds) {
        case (.exact, let total?):
            parts.append("\(elapsed) / \(clockText(total)) \(bar(s.positionSeconds / max(total, 0.001)))")
        case (.estimated, let total?):
            parts.append("\(elapsed) / ~\(clockText(total)) (estimate) \(bar(s.positionSeconds / max(total, 0.001)))")
        default:
            // No length to show: a station, a pipe, a live party.
            parts.append("\(elapsed) (live)")
        }
        parts.append("buffer \(Int(s.bufferFill * 100))%")
        if s.channel != .stereo { parts.append("channel \(s.channel.rawValue)") }
        if let sync = s.syncErrorMicroseconds {
            parts.append("sync \(sync >= 0 ? "+" : "")\(sync) µs")
            if let bound = clockBoundMicroseconds { parts.append("clock ±\(bound) µs") }
        } else if clockSettling {
            parts.append("clock settling")
        }
        if s.concealedPackets > 0 { parts.append("concealed \(s.concealedPackets)") }
        // The party's pause is the news; the player itself keeps playing (silence) meanwhile.
        parts.append(s.partyPaused ? "paused" : s.state.words)
        Console.status([parts.joined(separator: "  ")])
    }

    static func bar(_ fraction: Double) -> String {
        let width = 20
        let filled = fraction.isFinite ? Int(max(0, min(1, fraction)) * Double(width)) : 0
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
    }
}
