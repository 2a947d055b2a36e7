import Synchronization
#if canImport(Glibc)
import Glibc
import PartyCastCore
#endif

/// The one writer of everything a PartyCast program prints: whole lines, one write(2) each, under
/// one lock, so log lines from any thread never interleave with each other or with the status
/// display, which is cleared before a line and redrawn by its owner's next tick.
public enum Console {
    private struct State {
        /// Lines of the transient status display now on stderr (0: none).
        var statusLines = 0
    }

    private static let state = LockedValueBox(State())

    /// One line on stderr (logs, errors, prompts).
    public static func line(_ text: String) {
        state.withLockedValue { s in
            write(clearingStatus(&s) + text + "\n", to: STDERR_FILENO)
        }
    }

    /// Text on stderr without a newline (a question waiting for an answer).
    public static func prompt(_ text: String) {
        state.withLockedValue { s in write(clearingStatus(&s) + text, to: STDERR_FILENO) }
    }

    /// One line on stdout: a command's result, for scripts.
    public static func output(_ text: String) {
        state.withLockedValue { _ in write(text + "\n", to: STDOUT_FILENO) }
    }

    /// Replaces the status display on a terminal with `lines`, drawn in place.
    public static func status(_ lines: [String]) {
        state.withLockedValue { s in
            let text = clearingStatus(&s) + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\n")
            write(text, to: STDERR_FILENO)
            s.statusLines = lines.count
        }
    }

    /// Leaves the status display on screen and moves below it.
    public static func endStatus() {
        state.withLockedValue { s in
            guard s.statusLines > 0 else { return }
            write("\n", to: STDERR_FILENO)
            s.statusLines = 0
        }
    }

    /// The escape sequence that moves to the start of the status display and erases it.
    private static func clearingStatus(_ s: inout State) -> String {
        defer { s.statusLines = 0 }
        switch s.statusLines {
        case 0: return ""
        case 1: return "\r\u{1B}[2K"
        case let n: return "\u{1B}[\(n - 1)F\u{1B}[J"
        }
    }

    private static func write(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    public static var isTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}
