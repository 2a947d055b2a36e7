import Logging
import PartyCastPlayer
import Synchronization

/// Without a status line, what is heard changing is a line of the log: a song's title, or a
/// station's as it announces each one.
final class TitleLog: Sendable {
    private let logger: Logger
    private let last = Mutex<String?>(nil)

    init(logger: Logger) { self.logger = logger }

    func note(_ status: PlayerStatus) {
        guard let title = status.tags.title ?? status.tags.station,
              last.withLock({ last in defer { last = title }; return last != title }) else { return }
        logger.info("now playing: \(title)")
    }
}
