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
