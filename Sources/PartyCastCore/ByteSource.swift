/// Delivers a stream's bytes in pieces of whatever size arrives, as a network would. Made and read
/// on one thread (the player's producer), so it need not be Sendable.
public protocol ByteSource: AnyObject {
    /// The next piece (at most `maxBytes`), or an empty array at end of stream.
    func read(maxBytes: Int) throws(PartyCastError) -> [UInt8]
    /// Total length when known (local files); nil for live streams.
    var length: Int64? { get }
    /// Local files can seek; live streams cannot (their length may still be announced).
    var canSeek: Bool { get }
    /// Moves to an absolute byte position; only when `canSeek`.
    func seek(to offset: Int64) throws(PartyCastError)
    /// What the transport says is playing, as it changes (an ICY station's name and `StreamTitle`);
    /// nil when the stream itself is the only source of tags (files, pipes).
    var streamTags: TrackTags? { get }
    /// For a source whose `read` can wait long (a network stream, a pipe): makes a waiting read
    /// return at once, from any thread. nil for sources that never wait long (files).
    var wakeReader: (@Sendable () -> Void)? { get }
    /// Over a network: seeking works but reading the whole stream to index it is too costly
    /// (a remote file's exact duration is not worth its download).
    var isRemote: Bool { get }
}

extension ByteSource {
    public var streamTags: TrackTags? { nil }
    public var wakeReader: (@Sendable () -> Void)? { nil }
    public var isRemote: Bool { false }
}
