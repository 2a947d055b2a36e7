/// A source whose audio travels to the listeners in its own packets, undecoded (`--codec mp3`: the
/// file's MP3 frames). The broadcaster paces the packets; each listener decodes them.
public protocol PacketSource: AnyObject {
    /// Known once `prepare()` has returned.
    var format: AudioFormat? { get }
    /// Frames one packet decodes to (an MP3 frame's 1152, or 576).
    var framesPerPacket: Int { get }
    var tags: TrackTags { get }
    var duration: Duration { get }
    var cover: CoverArt? { get }
    /// Reads as far as needed to know the format and the duration.
    func prepare() throws(PartyCastError)
    /// The next packet; nil at the end.
    func nextPacket() throws(PartyCastError) -> AudioPacket?
    /// Moves so that the next packet's first kept frame is frame `frame` of the decoded audio; that
    /// packet starts a new stream (a fresh decoder), like the first.
    func seek(toFrame frame: Int) throws(PartyCastError)
    /// One packet that decodes to silence: what a pause sends after its fade, in the stream playing.
    var silentPacket: AudioPacket { get }
}

/// Encoded audio as it is sent: a fresh decoder that has decoded every packet since the source was
/// opened (or sought) turns `payload` into `skipFrames` frames to drop and then the `frames` frames
/// this packet stands for (any more it decodes to are dropped too).
public struct AudioPacket: Sendable, Equatable {
    public var payload: [UInt8]
    public var skipFrames: Int
    public var frames: Int

    public init(payload: [UInt8], skipFrames: Int, frames: Int) {
        self.payload = payload
        self.skipFrames = skipFrames
        self.frames = frames
    }
}
