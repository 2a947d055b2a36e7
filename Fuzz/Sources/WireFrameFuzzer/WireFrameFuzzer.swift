import FuzzDriver
import PartyCastWire

/// Decodes the input whole, then again split at a point taken from its first bytes: the decoder
/// must not crash, must stay within bounded memory (libFuzzer's RSS limit), and must give the same
/// messages and the same error both ways. Every message it returns must also survive re-encoding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let split = size < 2 ? 0 : (Int(bytes[0]) << 8 | Int(bytes[1])) % (size + 1)
    let whole = decode([bytes[...]])
    let pieces = decode([bytes[..<split], bytes[split...]])
    precondition(whole == pieces, "outcomes differ when split at \(split)")
    for message in whole.messages {
        // The encoder refuses only what a peer would: an empty envelope (inputs are far below the
        // size limit). Unknown fields are kept, so an envelope of a newer body kind re-encodes too.
        guard message.body != nil || !message.unknownFields.data.isEmpty else { continue }
        let frame: [UInt8]
        do {
            frame = try WireFraming.encode(message)
        } catch {
            preconditionFailure("a decoded message does not re-encode: \(error)")
        }
        precondition(decode([frame[...]]) == Outcome(messages: [message]), "a decoded message does not round-trip")
    }
    return 0
}

struct Outcome: Equatable {
    var messages: [PCEnvelope] = []
    var error: WireError?
}

func decode(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
    var decoder = WireFrameDecoder()
    var outcome = Outcome()
    do {
        for piece in pieces {
            decoder.push(piece)
            while let envelope = try decoder.next() { outcome.messages.append(envelope) }
        }
    } catch {
        outcome.error = error
    }
    return outcome
}

@_cdecl("WireFrameFuzzer_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv) { fuzzOneInput($0, $1) }
}
