import Foundation
import PartyCastControlSeam
import PartyCastCore

/// The files a remote may `add` besides those the broadcaster was started with: the audio files
/// under `--library`. A remote names one as the library lists it, by its absolute path, or by its
/// path inside the folder. Whatever the spelling, what is opened lies inside the folder once
/// symbolic links and `..` are resolved: no remote opens anything else on the machine.
public struct Library: Sendable {
    /// What a library lists, by extension: a folder is not opened file by file to find its audio.
    public static let extensions: Set<String> = ["mp3", "aac", "flac", "ogg", "oga", "opus", "wav"]

    /// The audio files under the folder, sorted, spelled as the folder was given plus their path in it.
    public let files: [String]
    /// The same, absolute: a link the folder holds is the library's own, wherever it leads.
    private let listed: Set<String>
    /// The folder as given, made absolute, and with its links resolved; nil for no library.
    private let spelledRoot: String?
    private let root: String?

    /// No library: only the files the broadcaster was started with may be added.
    public init() {
        files = []
        listed = []
        spelledRoot = nil
        root = nil
    }

    public init(folder: String) throws(PartyCastError) {
        do throws(SystemCallError) {
            root = try canonicalPath(folder)
        } catch {
            throw PartyCastError(.fileNotFound, "--library \(folder): \(error.errno == ENOENT ? "no such folder" : "\(error)")")
        }
        let spelledRoot = Self.absolute(folder, in: FileManager.default.currentDirectoryPath)
        self.spelledRoot = spelledRoot
        files = try Self.audioFiles(under: folder)
        listed = Set(files.map { Self.absolute($0, in: FileManager.default.currentDirectoryPath) })
    }

    /// The audio files under `folder` (by their extensions), sorted, spelled `folder/path-in-it`.
    public static func audioFiles(under folder: String) throws(PartyCastError) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else {
            throw PartyCastError(.fileNotFound, "\(folder): no such folder")
        }
        let base = folder.hasSuffix("/") ? folder : folder + "/"
        return walker.compactMap { $0 as? String }.filter(isAudioName).sorted().map { base + $0 }
    }

    static func isAudioName(_ path: String) -> Bool {
        extensions.contains(String(path.lowercased().split(separator: ".").last ?? ""))
    }

    /// The file to open for `requested`, or why it may not be added. A path whose spelling lies
    /// outside the folder is refused before anything about it is looked up, so a remote cannot
    /// probe which files exist elsewhere.
    func locate(_ requested: String) throws(PartyCommandError) -> String {
        if files.contains(requested) { return requested }
        guard let root, let spelledRoot else {
            throw PartyCommandError(.notFound, "\(requested) is not one of the broadcaster's files (it has no --library to add from)")
        }
        let spelled = Self.absolute(requested, in: spelledRoot)
        guard Self.isInside(spelled, spelledRoot) || Self.isInside(spelled, root) else {
            throw PartyCommandError(.notFound, "\(requested) is not in the library (\(spelledRoot))")
        }
        if listed.contains(spelled) { return spelled }
        let canonical: String
        do throws(SystemCallError) {
            canonical = try canonicalPath(spelled)
        } catch {
            if error.errno == ENOENT || error.errno == ENOTDIR { throw PartyCommandError(.notFound, "no such file in the library: \(requested)") }
            throw PartyCommandError(.invalid, "\(requested): \(error)")
        }
        guard Self.isInside(canonical, root) else {
            throw PartyCommandError(.invalid, "\(requested) is a link that leads out of the library")
        }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: canonical, isDirectory: &isFolder), isFolder.boolValue {
            throw PartyCommandError(.invalid, "\(requested) is a folder: add takes one audio file")
        }
        guard Self.isAudioName(canonical) else {
            throw PartyCommandError(.invalid, "\(requested) is not an audio file (the library holds .\(Self.extensions.sorted().joined(separator: ", .")))")
        }
        return canonical
    }

    /// Whether `path` is strictly under `folder` (both absolute, without `.` or `..`).
    static func isInside(_ path: String, _ folder: String) -> Bool {
        path.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/")
    }

    /// `path` made absolute against `base`, with `.` and `..` taken as written, not through links.
    static func absolute(_ path: String, in base: String) -> String {
        var parts: [Substring] = []
        for part in ((path.hasPrefix("/") ? "" : base + "/") + path).split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }
}
