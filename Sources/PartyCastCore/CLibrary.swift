/// Resolves a C library's functions when a part of PartyCast first needs them instead of at start-up,
/// so a listener maps only the libraries its job uses (mDNS, ALSA and the file decoders are each
/// hundreds of KB of resident memory). `open` is the library's shim loader: it opens the library by its
/// soname and fills a table of the functions PartyCast calls, or returns dlerror()'s words.
public func loadCLibrary<Functions>(
    _ library: String, code: PartyCastError.Code,
    _ open: (UnsafeMutablePointer<Functions>) -> UnsafePointer<CChar>?
) -> Result<Functions, PartyCastError> {
    let table = UnsafeMutablePointer<Functions>.allocate(capacity: 1)
    defer { table.deallocate() }
    if let failure = open(table) {
        return .failure(PartyCastError(code, "\(library) cannot be loaded: \(String(cString: failure))"))
    }
    return .success(table.move())
}
