import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// A local file, read with plain syscalls. Opening it reports missing paths, directories and
/// permission problems as errors a person can act on.
public final class FileByteSource: ByteSource {
    private let fd: Int32
    public let path: String
    public let length: Int64?
    public var canSeek: Bool { true }

    public init(path: String) throws(PartyCastError) {
        self.path = path
        let fd: Int32
        do {
            fd = try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC) }
        } catch {
            switch error.errno {
            case ENOENT: throw PartyCastError(.fileNotFound, "\(path): no such file; check the path")
            case EACCES: throw PartyCastError(.permissionDenied, "\(path): permission denied; check the file's permissions")
            default: throw PartyCastError(.io, "\(path): cannot open (\(error))")
            }
        }
        var info = stat()
        do {
            _ = try systemCall("fstat") { fstat(fd, &info) }
        } catch {
            close(fd)
            throw PartyCastError(.io, "\(path): cannot stat (\(error))")
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            close(fd)
            throw PartyCastError(.isDirectory, "\(path) is a directory; give the path of an audio file inside it")
        }
        self.fd = fd
        length = Int64(info.st_size)
    }

    deinit { close(fd) }

    public func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: maxBytes)
        let fd = self.fd
        do {
            let n = try bytes.withUnsafeMutableBytes { buffer throws(SystemCallError) in
                try systemCall("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            }
            bytes.removeLast(maxBytes - n)
            return bytes
        } catch {
            throw PartyCastError(.io, "\(path): read failed (\(error))")
        }
    }

    public func seek(to offset: Int64) throws(PartyCastError) {
        let fd = self.fd
        do {
            _ = try systemCall("lseek") { lseek(fd, off_t(offset), SEEK_SET) }
        } catch {
            throw PartyCastError(.io, "\(path): seek failed (\(error))")
        }
    }
}

/// Bytes already in memory, handed out in pieces whose sizes follow a seeded generator:
/// the way tests check that nothing depends on how a stream is split.
public final class MemoryByteSource: ByteSource {
    private let bytes: [UInt8]
    private var position = 0
    private var random: SplitMix64
    private let maxPiece: Int
    public let canSeek: Bool
    public var length: Int64? { Int64(bytes.count) }

    /// - Parameter seekable: false to behave like a live stream whose length is announced.
    public init(bytes: [UInt8], seed: UInt64, maxPiece: Int = 4096, seekable: Bool = true) {
        self.bytes = bytes
        self.canSeek = seekable
        self.random = SplitMix64(seed: seed)
        self.maxPiece = maxPiece
    }

    public func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
        let piece = Int(random.next() % UInt64(min(maxBytes, maxPiece))) + 1
        let end = min(bytes.count, position + piece)
        defer { position = end }
        return Array(bytes[position..<end])
    }

    public func seek(to offset: Int64) throws(PartyCastError) {
        position = Int(min(max(offset, 0), Int64(bytes.count)))
    }
}

/// A small, fast, seedable generator (SplitMix64) so random splits are reproducible.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
