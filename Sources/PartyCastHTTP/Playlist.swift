import FoundationEssentials

/// M3U (plain, not HLS) and PLS playlists: what a station's "listen" link usually is.
public enum Playlist {
    public enum Kind: Sendable, Equatable { case m3u, pls }

    public enum ParseError: Error, Sendable, Equatable {
        /// An HLS media playlist (segments, not a stream): PartyCast does not play HLS.
        case hls
    }

    /// Content types stations give their playlists.
    static let contentTypes: Set<String> = [
        "audio/x-mpegurl", "audio/mpegurl", "application/x-mpegurl", "application/vnd.apple.mpegurl",
        "audio/x-scpls", "audio/scpls", "application/pls+xml", "application/pls",
    ]

    public static func isPlaylistContentType(_ contentType: String) -> Bool {
        contentTypes.contains(contentType.lowercased())
    }

    /// Whether a body looks like a playlist by its content: `#EXTM3U`, `[playlist]`, or lines of URLs.
    public static func recognise(_ head: [UInt8]) -> Kind? {
        let text = String(decoding: head, as: UTF8.self).trimmingLeadingSpace().lowercased()
        if text.hasPrefix("#extm3u") { return .m3u }
        if text.hasPrefix("[playlist]") { return .pls }
        let first = text.split(whereSeparator: \.isNewline).first { !$0.hasPrefix("#") }.map(String.init) ?? ""
        return first.hasPrefix("http://") || first.hasPrefix("https://") ? .m3u : nil
    }

    /// The entries of a playlist, in order, relative ones resolved against `base` (the playlist's
    /// own URL, or a local file's) — a pure function, so a local .m3u/.pls file can use it too.
    public static func entries(_ bytes: [UInt8], base: URL?) throws(ParseError) -> [String] {
        let text = String(decoding: bytes, as: UTF8.self).trimmingLeadingSpace()
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmed() }.filter { !$0.isEmpty }
        var raw: [String] = []
        if lines.first?.lowercased() == "[playlist]" {
            // File1=…, File2=…: ordered by their number, not their line.
            var numbered: [(Int, String)] = []
            for line in lines {
                guard let equals = line.firstIndex(of: "="), line.lowercased().hasPrefix("file"),
                      let number = Int(line[line.index(line.startIndex, offsetBy: 4)..<equals]) else { continue }
                numbered.append((number, line[line.index(after: equals)...].trimmed()))
            }
            raw = numbered.sorted { $0.0 < $1.0 }.map(\.1)
        } else {
            if lines.contains(where: { $0.hasPrefix("#EXT-X-") }) { throw .hls }
            raw = lines.filter { !$0.hasPrefix("#") }
        }
        return raw.compactMap { entry in
            if let base, let url = URL(string: entry, relativeTo: base) { return url.absoluteString }
            return entry
        }
    }
}

extension StringProtocol {
    /// Without a byte-order mark and leading whitespace.
    fileprivate func trimmingLeadingSpace() -> SubSequence {
        self.drop { $0 == "\u{FEFF}" || $0.isWhitespace }
    }

    fileprivate func trimmed() -> String {
        String(trimmingLeadingSpace().reversed().drop { $0.isWhitespace }.reversed())
    }
}
