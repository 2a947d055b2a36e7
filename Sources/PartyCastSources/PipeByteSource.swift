import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// Standard input or a FIFO another program writes to (mpd, librespot, shairport-sync): a live
/// stream that cannot seek. A read waits in poll(2) on the pipe and a wake pipe, so stopping never
/// waits for the writer, and nothing wakes while no data comes.
public final class PipeByteSource: ByteSource {
    private let fd: Int32
    private let ownsDescriptor: Bool
    /// A write end of the FIFO held open by the reader itself (`outlivingWriters`), or -1.
    private let heldWriter: Int32
    private let wake: WakePipe
    /// How the source is named in messages ("standard input", a FIFO's path).
    public let name: String
    public var length: Int64? { nil }
    public var canSeek: Bool { false }
    public var wakeReader: (@Sendable () -> Void)? { { [wake] in wake.wake() } }

    /// Standard input.
    public init() throws(PartyCastError) {
        fd = STDIN_FILENO
        ownsDescriptor = false
        heldWriter = -1
        name = "standard input"
        wake = try Self.makeWakePipe()
    }

    /// Says whether `path` can be opened as a pipe, without opening it: opening and closing a FIFO
    /// to look would be a reader leaving under a writer that already came (its next write fails).
    public static func check(path: String) throws(PartyCastError) {
        var info = stat()
        if stat(path, &info) != 0 {
            throw errno == ENOENT ? PartyCastError(.fileNotFound, "pipe:\(path): no such FIFO; create it with mkfifo \(path)")
                : PartyCastError(.io, "pipe:\(path): cannot look at it (errno \(errno))")
        }
        if info.st_mode & S_IFMT == S_IFDIR { throw PartyCastError(.isDirectory, "pipe:\(path) is a directory; give a FIFO's path") }
        if access(path, R_OK) != 0 { throw PartyCastError(.permissionDenied, "pipe:\(path): permission denied") }
    }

    /// A FIFO (or any readable file descriptor a path names). Opening a FIFO waits for its writer,
    /// so it is opened without blocking and the first read waits instead, where it can be woken.
    /// `outlivingWriters`: the FIFO never ends; a writer that closes it (mpd restarting) is silence
    /// until the next one opens it. Its own write end, held open, keeps the end of stream away.
    public init(path: String, outlivingWriters: Bool = false) throws(PartyCastError) {
        do {
            fd = try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        } catch {
            switch error.errno {
            case ENOENT: throw PartyCastError(.fileNotFound, "pipe:\(path): no such FIFO; create it with mkfifo \(path)")
            case EACCES: throw PartyCastError(.permissionDenied, "pipe:\(path): permission denied")
            default: throw PartyCastError(.io, "pipe:\(path): cannot open (\(error))")
            }
        }
        ownsDescriptor = true
        name = path
        var held: Int32 = -1
        do {
            if outlivingWriters {
                var info = stat()
                let reader = fd
                _ = try systemCall("fstat") { fstat(reader, &info) }
                guard info.st_mode & S_IFMT == S_IFIFO else { throw PartyCastError(.invalidArgument, "pipe:\(path) is not a FIFO (make one with mkfifo)") }
                held = try systemCall("open") { open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK) }
            }
            wake = try Self.makeWakePipe()
        } catch {
            close(fd)
            if held >= 0 { close(held) }
            throw error as? PartyCastError ?? PartyCastError(.io, "pipe:\(path): cannot hold it open (\(error))")
        }
        heldWriter = held
    }

    private static func makeWakePipe() throws(PartyCastError) -> WakePipe {
        do { return try WakePipe() } catch { throw PartyCastError(.io, "cannot make a pipe (\(error))") }
    }

    deinit {
        if ownsDescriptor { close(fd) }
        if heldWriter >= 0 { close(heldWriter) }
    }

    /// Waits for data; empty at end of stream (the writer closed), or when woken (the caller is
    /// stopping). A FIFO no writer has opened yet polls as not ready, so that is waited out too.
    public func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: maxBytes)
        while true {
            let fd = self.fd
            do throws(SystemCallError) {
                if try waitUntilReadable([fd, wake.readEnd])[1] {
                    wake.drain()
                    return []
                }
                let n = try systemCall("read") { bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
                if n == 0 { return [] }
                bytes.removeLast(maxBytes - n)
                return bytes
            } catch where error.errno == EAGAIN {
                continue  // readable, then drained by no one else: the writer's bytes are not there yet
            } catch {
                throw PartyCastError(.io, "\(name): \(error)")
            }
        }
    }

    public func seek(to offset: Int64) throws(PartyCastError) {
        throw PartyCastError(.invalidArgument, "\(name) is a pipe and cannot seek")
    }
}
