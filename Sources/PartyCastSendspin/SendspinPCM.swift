/// The spec's `pcm` codec: little-endian signed integers, 24-bit samples packed in 3 bytes.
public enum SendspinPCM {
    /// Float samples (−1…1, clipped) as `bitDepth` (16 or 24) PCM.
    public static func encode(_ samples: [Float], bitDepth: Int) -> [UInt8] {
        let bytesPerSample = bitDepth == 24 ? 3 : 2
        let scale = Float((1 << (bytesPerSample * 8 - 1)) - 1)
        var bytes = [UInt8](repeating: 0, count: samples.count * bytesPerSample)
        for (index, sample) in samples.enumerated() {
            // NaN clips to 0; the clamp keeps the conversion below from trapping.
            let value = Int32(sample.isNaN ? 0 : (min(max(sample, -1), 1) * scale).rounded())
            let base = index * bytesPerSample
            for byte in 0..<bytesPerSample { bytes[base + byte] = UInt8(truncatingIfNeeded: value >> (8 * byte)) }
        }
        return bytes
    }
}

extension SendspinPCM {
    /// `bytes` of `bitDepth` (16 or 24) PCM as floats in −1…1, appended to `output`; a trailing
    /// partial sample is ignored.
    public static func decode(_ bytes: [UInt8], bitDepth: Int, into output: inout [Float]) {
        let bytesPerSample = bitDepth == 24 ? 3 : 2
        let scale = 1 / Float(1 << (bytesPerSample * 8 - 1))
        output.reserveCapacity(output.count + bytes.count / bytesPerSample)
        var index = 0
        while index + bytesPerSample <= bytes.count {
            var value: Int32 = 0
            for byte in 0..<bytesPerSample { value |= Int32(bytes[index + byte]) << (8 * byte) }
            // Sign-extend from the sample's top bit.
            let unused = Int32(32 - 8 * bytesPerSample)
            output.append(Float((value << unused) >> unused) * scale)
            index += bytesPerSample
        }
    }
}
