/// Anything that produces interleaved Float32 PCM for the player: a decoded MP3 stream or a generator.
/// Called from the player's producer thread only, never from the audio thread.
public protocol PCMSource: AnyObject {
    /// Known once the first audio has been produced (or earlier); nil before.
    var format: AudioFormat? { get }
    var tags: TrackTags { get }
    var duration: Duration { get }
    /// Reads as far as needed to know the format (and the duration when it can); may block on I/O.
    func prepare() throws(PartyCastError)
    /// Appends the next samples to `buffer` (a whole number of frames); false at end of stream.
    func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool
    /// Moves so that the next sample produced is frame `frame` (sample frames, at `format`'s rate).
    func seek(toFrame frame: Int) throws(PartyCastError)
    var isSeekable: Bool { get }
    /// Bytes the source dropped as unreadable (garbage between frames); 0 for generators.
    var skippedBytes: Int64 { get }
    /// Packets the source could not use and made up for with silence or concealment (a broadcast's
    /// corrupt or absurd chunks); 0 for files and generators.
    var concealedPackets: Int { get }
    /// The track's picture (an ID3v2 APIC), known once `prepare()` has returned; nil if none.
    var cover: CoverArt? { get }
    /// For a source whose `produce` can wait indefinitely for data (a broadcast): makes a waiting
    /// `produce` return at once, from any thread. nil for sources that never wait long (files).
    var wakeProducer: (@Sendable () -> Void)? { get }
    /// Whether a server paces it (a station): what it sent ahead is delay, not audio to keep.
    var isRemote: Bool { get }
}

/// How long a source is, and how sure we are.
public enum Duration: Sendable, Equatable {
    case unknown
    /// From a running average bitrate: refined as the stream plays.
    case estimated(frames: Int)
    /// From a Xing/Info header or a scan of every frame: to the sample.
    case exact(frames: Int)

    public var frames: Int? {
        switch self {
        case .unknown: nil
        case .estimated(let f), .exact(let f): f
        }
    }
}

extension PCMSource {
    public var skippedBytes: Int64 { 0 }
    public var concealedPackets: Int { 0 }
    public var cover: CoverArt? { nil }
    public var wakeProducer: (@Sendable () -> Void)? { nil }
    public var isRemote: Bool { false }
}
