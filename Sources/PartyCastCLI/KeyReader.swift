import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads keys from a terminal in raw mode on its own thread: space, ←/→, q. The thread sleeps in
/// poll(2) until a key or `finish()` (a byte down a pipe) wakes it: no periodic wakeups.
public final class KeyReader: Sendable {
    public enum Key: Sendable {
        case space, left, right, quit
    }

    private let saved: termios
    private let stop: WakePipe
    private let thread: DedicatedThread

    /// Nil when standard input is not a terminal (nothing to read keys from).
    public init?(onKey: @escaping @Sendable (Key) -> Void) {
        guard isatty(STDIN_FILENO) == 1 else { return nil }
        guard let stop = try? WakePipe() else { return nil }
        let wake = stop.readEnd
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        saved = original
        var raw = original
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        self.stop = stop
        thread = DedicatedThread {
            var escape: [UInt8] = []
            while true {
                // A failed poll or read (the terminal went away) ends the keys; the party plays on.
                guard let ready = try? waitUntilReadable([STDIN_FILENO, wake]), !ready[1] else { return }
                guard ready[0] else { continue }
                var byte: UInt8 = 0
                guard (try? systemCall("read") { read(STDIN_FILENO, &byte, 1) }) == 1 else { return }
                escape.append(byte)
                switch escape {
                case [0x1B], [0x1B, 0x5B]: continue
                case [0x1B, 0x5B, 0x43]: onKey(.right)
                case [0x1B, 0x5B, 0x44]: onKey(.left)
                case [0x20]: onKey(.space)
                case [UInt8(ascii: "q")], [UInt8(ascii: "Q")]: onKey(.quit)
                default: break
                }
                escape.removeAll()
            }
        }
    }

    /// Stops reading and gives the terminal back as it was.
    public func finish() {
        stop.wake()
        thread.join()
        var original = saved
        tcsetattr(STDIN_FILENO, TCSANOW, &original)
    }
}
