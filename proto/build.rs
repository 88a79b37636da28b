//! Compiles EMCO's wire-compatible services with protoc (Debian's `protobuf-compiler`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "emco/installapp.proto",
        "emco/updateapp.proto",
        "emco/readynotify.proto",
        "emco/contextupdate.proto",
        "emco/placementcontroller.proto",
        "emco/statusnotify.proto",
        "emco/clmcontroller.proto",
        // Ours: the AppContext store over gRPC (no package either, so it joins the same module).
        "emco/ext/appcontext.proto",
    ];
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&files, &["."])?;
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
