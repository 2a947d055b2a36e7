// SwiftPM links an executable target's entry point under the name `<target>_main`; each fuzzer
// defines that and hands control to libFuzzer's driver through `runLibFuzzer`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process's arguments, calling `fuzzOneInput` for every input.
public func runLibFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                         _ fuzzOneInput: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments, fuzzOneInput)
}
