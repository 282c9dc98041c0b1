//! `sqlx::migrate!` embeds the migrations when the server compiles; without this, adding a migration file would not
//! rebuild it (the sqlx documentation's recommended build script).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
