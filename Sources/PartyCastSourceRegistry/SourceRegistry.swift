import PartyCastCore
import PartyCastDecoder
import PartyCastHTTP
import PartyCastSources

/// What the command line says about sources beyond their specs.
public struct SourceOptions: Sendable {
    /// The layout of raw PCM from a pipe (`--pcm-format`).
    public var rawPCM = RawPCMFormat.standard
    /// Pipes carry raw PCM even when their bytes look like an encoded format.
    public var pipesAreRaw = false
    /// What a pipe is called where it names nothing itself (`--title`); else its path.
    public var pipeTitle: String?
    /// A FIFO whose writer closes it waits for the next writer instead of ending (mpd restarting).
    public var pipesOutliveWriters = false
    /// Where a network source tells of its reconnects, one line each.
    public var onEvent: (@Sendable (String) -> Void)?

    public init() {}
}

/// One kind of source: which specs it takes and how it opens them.
public protocol SourceKind: Sendable {
    func claims(_ spec: String) -> Bool
    /// Checks the spec now, so a bad one is refused with one line before the party starts.
    func resolve(_ spec: String, options: SourceOptions) throws(PartyCastError) -> ResolvedSource
}

/// The one place a spec is turned into a source, for `broadcaster share` and `listener play` alike.
/// A new kind of source is a `SourceKind` added to `kinds`.
public enum SourceRegistry {
    /// Tried in order; files take whatever no other kind claims.
    public static let kinds: [any SourceKind] = [ToneSourceKind(), PipeSourceKind(), HTTPSourceKind(), FileSourceKind()]

    /// Whether `spec` names a pipe (`-` or `pipe:PATH`).
    public static func isPipe(_ spec: String) -> Bool { PipeSourceKind.names(spec) }

    public static func resolve(_ spec: String, options: SourceOptions = SourceOptions()) throws(PartyCastError) -> ResolvedSource {
        for kind in kinds where kind.claims(spec) { return try kind.resolve(spec, options: options) }
        throw PartyCastError(.invalidArgument, "\(spec): not a source PartyCast knows")
    }

    /// One line for `--help`: the specs every kind takes.
    public static let help = "an audio file (MP3, AAC, FLAC, Ogg Vorbis/Opus, WAV — recognised by its bytes), an http(s):// station, playlist or file, tone:FREQ[:SECONDS], - (standard input) or pipe:PATH (a FIFO)"
}

/// `tone:FREQ[:SECONDS]`: a sine generator.
struct ToneSourceKind: SourceKind {
    func claims(_ spec: String) -> Bool { spec.hasPrefix("tone:") }

    func resolve(_ spec: String, options: SourceOptions) throws(PartyCastError) -> ResolvedSource {
        let parameters = String(spec.dropFirst(5))
        _ = try ToneGenerator(spec: parameters)
        return ResolvedSource(spec: spec, label: spec, isLive: false) { () throws(PartyCastError) -> PCMSource in try ToneGenerator(spec: parameters) }
    }
}

/// `-` (standard input) or `pipe:PATH` (a FIFO): an encoded stream recognised by its bytes, else raw
/// PCM in the layout `--pcm-format` gives.
struct PipeSourceKind: SourceKind {
    func claims(_ spec: String) -> Bool { Self.names(spec) }

    static func names(_ spec: String) -> Bool { spec == "-" || spec.hasPrefix("pipe:") }

    func resolve(_ spec: String, options: SourceOptions) throws(PartyCastError) -> ResolvedSource {
        let path = spec == "-" ? nil : String(spec.dropFirst(5))
        if let path {
            guard !path.isEmpty else { throw PartyCastError(.invalidArgument, "pipe: needs a path, e.g. pipe:/tmp/snapfifo") }
            try PipeByteSource.check(path: path)
        }
        let format = options.rawPCM, raw = options.pipesAreRaw, outliving = options.pipesOutliveWriters
        return ResolvedSource(spec: spec, label: options.pipeTitle ?? path ?? "standard input", isLive: true) { () throws(PartyCastError) -> PCMSource in
            let bytes: PipeByteSource
            if let path { bytes = try PipeByteSource(path: path, outlivingWriters: outliving) } else { bytes = try PipeByteSource() }
            if raw { return WAVSource(bytes: bytes, raw: format) }
            return try DecoderRegistry.open(bytes) { unrecognised throws(PartyCastError) in WAVSource(bytes: unrecognised, raw: format) }
        }
    }
}

/// An http(s):// station, playlist or remote file. Checked when it plays, not before: a station
/// that is down now may be up by its turn. A station is live; a remote file of known length is not.
struct HTTPSourceKind: SourceKind {
    func claims(_ spec: String) -> Bool { HTTPByteSource.handles(spec) }

    func resolve(_ spec: String, options: SourceOptions) throws(PartyCastError) -> ResolvedSource {
        let onEvent = options.onEvent
        return ResolvedSource(spec: spec, label: spec, isLive: true, open: { () throws(PartyCastError) -> PCMSource in
            try DecoderRegistry.open(HTTPByteSource(url: spec, onEvent: onEvent))
        }, openPackets: { () throws(PartyCastError) -> PacketSource in
            let bytes = try HTTPByteSource(url: spec, onEvent: onEvent)
            // A station's frames come at its own pace, which the party's clock cannot follow frame-exactly.
            guard bytes.length != nil else {
                throw PartyCastError(.unsupportedFormat, "a live stream, and --codec mp3 sends files only (use --codec opus for stations)")
            }
            return try DecoderRegistry.openMP3Frames(bytes)
        })
    }
}

/// A local file, its format recognised by its bytes.
struct FileSourceKind: SourceKind {
    func claims(_ spec: String) -> Bool { true }

    func resolve(_ spec: String, options: SourceOptions) throws(PartyCastError) -> ResolvedSource {
        _ = try FileByteSource(path: spec)
        let label = String(spec.split(separator: "/").last ?? Substring(spec))
        return ResolvedSource(spec: spec, label: label, isLive: false, open: { () throws(PartyCastError) -> PCMSource in
            try DecoderRegistry.open(FileByteSource(path: spec))
        }, openPackets: { () throws(PartyCastError) -> PacketSource in
            try DecoderRegistry.openMP3Frames(FileByteSource(path: spec))
        })
    }
}
