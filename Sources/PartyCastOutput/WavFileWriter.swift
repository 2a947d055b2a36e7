import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes interleaved Float32 as an IEEE-float WAV file. Sizes in the header are filled in on
/// `finish()`; until then they read as 0 (readers such as sox still take the data).
final class WavFileWriter {
    private let fd: Int32
    private let path: String
    private let format: AudioFormat
    private var dataBytes = 0

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

    deinit { close(fd) }

    /// Appends samples; a plain write(2), no allocation.
    func write(_ samples: UnsafeBufferPointer<Float>) throws(PartyCastError) {
        try writeAll(UnsafeRawBufferPointer(samples))
        dataBytes += samples.count * 4
    }

    /// Fills in the sizes in the header.
    func finish() throws(PartyCastError) {
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
