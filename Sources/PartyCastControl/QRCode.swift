#if canImport(Glibc)
import Glibc
#endif
import CQREncode
import PartyCastCore

/// A QR code of the remote page's URL for a phone to scan off the broadcaster's terminal. libqrencode
/// encodes; the drawing is `qrencode -t UTF8`'s: two rows of modules a line in half blocks, light
/// modules drawn, in a quiet zone of 4, so it reads on a dark terminal.
public enum QRCode {
    static let quietZone = 4

    public static func lines(encoding text: String) throws(PartyCastError) -> [String] {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1) else {
            throw PartyCastError(.invalidArgument, "no QR code of \(text): \(String(cString: strerror(errno)))")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let modules = code.pointee.data!
        let size = width + 2 * quietZone
        /// Bit 0 of each module is dark; outside the symbol (and below the last row) all is light.
        func dark(_ x: Int, _ y: Int) -> Bool {
            let (column, row) = (x - quietZone, y - quietZone)
            guard (0..<width).contains(column), (0..<width).contains(row) else { return false }
            return modules[row * width + column] & 1 != 0
        }
        return stride(from: 0, to: size, by: 2).map { y in
            String((0..<size).map { x -> Character in
                switch (dark(x, y), dark(x, y + 1)) {
                case (false, false): "█"
                case (false, true): "▀"
                case (true, false): "▄"
                case (true, true): " "
                }
            })
        }
    }
}
