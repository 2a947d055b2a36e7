import PartyCastControlSeam
import PartyCastCore
import Synchronization

/// What the remotes list of the files `add` accepts, each with its title and artist. The files the
/// broadcaster started with were probed already (their queue items); the library's are opened one
/// by one on a thread of their own, once: a folder may hold thousands, and the party does not wait
/// for them. Until a file is read, or when it has no tags, it is listed by its path alone.
final class LibraryCatalogue: Sendable {
    private let entries: LockedValueBox<[LibraryEntry]>
    private let stopped = Atomic<Bool>(false)

    /// - Parameters:
    ///   - files: the paths in the order the remotes list them.
    ///   - known: the tags already read, by path.
    ///   - opener: makes a source of a path, as `add` does.
    init(files: [String], known: [String: TrackTags], opener: @escaping @Sendable (String) throws(PartyCastError) -> ResolvedSource) {
        let listed = files.map { path in LibraryEntry(path: path, title: known[path]?.title, artist: known[path]?.artist) }
        entries = LockedValueBox(listed)
        let unread = files.indices.filter { known[files[$0]] == nil }
        guard !unread.isEmpty else { return }
        // Holds the catalogue until every file is read or the party is over.
        _ = DedicatedThread { [self] in
            for index in unread where !stopped.load(ordering: .relaxed) {
                // A file that cannot be opened is listed by its path; `add` says what is wrong with it.
                guard let source = try? opener(files[index]) else { continue }
                let tags = PartyItem.probe(source, id: 0, passingThrough: false).tags
                guard tags.title != nil || tags.artist != nil else { continue }
                entries.withLockedValue { $0[index].title = tags.title; $0[index].artist = tags.artist }
            }
        }
    }

    var list: [LibraryEntry] { entries.withLockedValue { $0 } }

    /// Reads no more files (the party is over).
    func stop() { stopped.store(true, ordering: .relaxed) }
}
