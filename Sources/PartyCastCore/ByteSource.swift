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
}
