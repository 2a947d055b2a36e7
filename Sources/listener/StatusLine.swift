import PartyCastCore
import PartyCastPlayer

/// The one-line status display on a terminal: title/artist, elapsed/duration with a bar,
/// buffer fill, party mode's sync error and state. Redrawn in place.
enum StatusLine {
    static func draw(_ s: PlayerStatus) {
        var parts: [String] = []
        let who = [s.tags.title, s.tags.artist].compactMap { $0 }.joined(separator: " — ")
        if !who.isEmpty { parts.append("♪ \(who)") }
        let elapsed = clock(s.positionSeconds)
        switch (s.duration, s.durationSeconds) {
        case (.exact, let total?):
            parts.append("\(elapsed) / \(clock(total)) \(bar(s.positionSeconds / max(total, 0.001)))")
        case (.estimated, let total?):
            parts.append("\(elapsed) / ~\(clock(total)) (estimate) \(bar(s.positionSeconds / max(total, 0.001)))")
        default:
            parts.append(elapsed)
        }
        parts.append("buffer \(Int(s.bufferFill * 100))%")
        if let sync = s.syncErrorMicroseconds { parts.append("sync \(sync >= 0 ? "+" : "")\(sync) µs") }
        parts.append(s.state.rawValue)
        printError("\r\u{1B}[2K" + parts.joined(separator: "  "), newline: false)
    }

    static func end() { printError("", newline: true) }

    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded(.down))
        let (m, sec) = (total / 60, total % 60)
        return "\(m < 10 ? "0" : "")\(m):\(sec < 10 ? "0" : "")\(sec)"
    }

    static func bar(_ fraction: Double) -> String {
        let width = 20
        let filled = max(0, min(width, Int(fraction * Double(width))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
    }
}
