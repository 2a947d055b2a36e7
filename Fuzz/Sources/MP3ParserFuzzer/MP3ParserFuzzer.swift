import FuzzDriver
import PartyCastMP3Parser

/// Parses the input whole, then again split at a point taken from its first bytes: the parser must
/// not crash, must stay within bounded memory (libFuzzer's RSS limit), and must give the same
/// events and skipped-byte count both ways.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let split = size < 2 ? 0 : (Int(bytes[0]) << 8 | Int(bytes[1])) % (size + 1)
    let whole = parse([bytes[...]])
    let pieces = parse([bytes[..<split], bytes[split...]])
    precondition(whole == pieces, "events differ when split at \(split)")
    return 0
}

struct Outcome: Equatable {
    var events: [MP3Event] = []
    var skipped: Int64 = 0
    var failed = false
}

func parse(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
    var parser = MP3Parser()
    var outcome = Outcome()
    do {
        for piece in pieces {
            parser.push(piece)
            while let event = try parser.next() { outcome.events.append(event) }
        }
        parser.finish()
        while let event = try parser.next() { outcome.events.append(event) }
    } catch {
        outcome.failed = true
    }
    outcome.skipped = parser.skippedBytes
    return outcome
}

@_cdecl("MP3ParserFuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv) { fuzzOneInput($0, $1) }
}
