import PartyCastCore
import PartyCastPlayer
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Reads keys from a terminal in raw mode on its own thread: space, ←/→, q.
final class KeyReader: @unchecked Sendable {
    // @unchecked: `thread` is set once in init, then only joined by finish() on the same thread.
    private let saved: termios
    private let done = Atomic<Bool>(false)
    private var thread: DedicatedThread?

    init(player: Player) {
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        saved = original
        var raw = original
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        thread = DedicatedThread { [self] in
            var escape: [UInt8] = []
            while !done.load(ordering: .acquiring) {
                var poller = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                var byte: UInt8 = 0
                guard read(STDIN_FILENO, &byte, 1) == 1 else { return }
                escape.append(byte)
                switch escape {
                case [0x1B], [0x1B, 0x5B]: continue
                case [0x1B, 0x5B, 0x43]: player.seek(bySeconds: 10)
                case [0x1B, 0x5B, 0x44]: player.seek(bySeconds: -10)
                case [0x20]: player.togglePause()
                case [UInt8(ascii: "q")], [UInt8(ascii: "Q")]: player.stop()
                default: break
                }
                escape.removeAll()
            }
        }
    }

    /// Stops reading and gives the terminal back as it was.
    func finish() {
        done.store(true, ordering: .releasing)
        thread?.join()
        var original = saved
        tcsetattr(STDIN_FILENO, TCSANOW, &original)
    }
}
