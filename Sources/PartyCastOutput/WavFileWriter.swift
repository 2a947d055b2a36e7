import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes interleaved Float32 as an IEEE-float WAV file. Sizes in the header are filled in on
/// `finish()`; until then they read as 0 (readers such as sox still take the data). Samples are
/// gathered in a preallocated buffer and written in 64 KiB blocks: a real-time output's 10 ms
/// periods would otherwise cost a write(2) each, the bulk of its kernel time.
final class WavFileWriter {
    private static let blockBytes = 64 * 1024
    private let fd: Int32
    private let path: String
    private let format: AudioFormat
    private var dataBytes = 0
    private let block = UnsafeMutableRawBufferPointer.allocate(byteCount: WavFileWriter.blockBytes, alignment: 16)
    private var blockFill = 0

    init(path: String, format: AudioFormat) throws(PartyCastError) {
        self.path = path
        self.format = format
        do {
            fd = try systemCall("open") { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        } catch {
            throw PartyCastError(.output, "cannot create \(path): \(error)")
        }
        try writeHeader()
    }

    deinit {
        close(fd)
        block.deallocate()
    }

    /// Appends samples: into the block, written out when full; no allocation.
    func write(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError) {
        var bytes = UnsafeRawBufferPointer(samples)
        dataBytes += bytes.count
        while !bytes.isEmpty {
            let count = min(bytes.count, block.count - blockFill)
            UnsafeMutableRawBufferPointer(rebasing: block[blockFill..<(blockFill + count)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
            blockFill += count
            bytes = UnsafeRawBufferPointer(rebasing: bytes[count...])
            if blockFill == block.count { try flush() }
        }
    }

    /// Drops the last `frames` frames written (all, if there are fewer): from the block if they are
    /// still there, else by cutting the file short.
    func dropLast(frames: Int) throws(PartyCastError) {
        let frameBytes = 4 * format.channels
        let bytes = min(dataBytes / frameBytes, max(0, frames)) * frameBytes
        dataBytes -= bytes
        guard bytes > blockFill else {
            blockFill -= bytes
            return
        }
        let fromFile = off_t(bytes - blockFill)
        blockFill = 0
        let fd = self.fd
        do {
            let end = try systemCall("lseek") { lseek(fd, -fromFile, SEEK_CUR) }
            _ = try systemCall("ftruncate") { ftruncate(fd, end) }
        } catch {
            throw PartyCastError(.output, "\(path): \(error)")
        }
    }

    private func flush() throws(PartyCastError) {
        guard blockFill > 0 else { return }
        try writeAll(UnsafeRawBufferPointer(rebasing: block[0..<blockFill]))
        blockFill = 0
    }

    /// Writes what is gathered and fills in the sizes in the header.
    func finish() throws(PartyCastError) {
        try flush()
        do {
            _ = try systemCall("lseek") { lseek(fd, 0, SEEK_SET) }
        } catch {
            throw PartyCastError(.output, "\(path): \(error)")
        }
        try writeHeader()
    }

    private func writeHeader() throws(PartyCastError) {
        var header: [UInt8] = []
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { header += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { header += $0 } }
        let frames = dataBytes / (4 * format.channels)
        header += "RIFF".utf8; u32(4 + 26 + 12 + 8 + dataBytes)
        header += "WAVE".utf8
        header += "fmt ".utf8; u32(18)
        u16(3)  // WAVE_FORMAT_IEEE_FLOAT
        u16(format.channels); u32(format.sampleRate); u32(format.sampleRate * format.channels * 4)
        u16(format.channels * 4); u16(32); u16(0)
        header += "fact".utf8; u32(4); u32(frames)
        header += "data".utf8; u32(dataBytes)
        let failure = header.withUnsafeBytes { bytes -> PartyCastError? in
            do throws(PartyCastError) { try writeAll(bytes); return nil } catch { return error }
        }
        if let failure { throw failure }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(PartyCastError) {
        var offset = 0
        let fd = self.fd
        while offset < bytes.count {
            do {
                offset += try systemCall("write") { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            } catch {
                throw PartyCastError(.output, "writing \(path) failed: \(error)")
            }
        }
    }
}
