//! The per-request temp directories under the server's temp root.

use std::path::Path;

/// Prefix of every job's temp directory (see `job::JobContext::new`): what start-up cleanup and
/// `plimsoll_temp_files` look for.
pub const JOB_DIR_PREFIX: &str = "plimsoll-job-";

fn job_dirs(root: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(JOB_DIR_PREFIX))
}

/// How many job directories exist now (`plimsoll_temp_files`).
pub fn count(root: &Path) -> usize {
    job_dirs(root).count()
}

/// Removes job directories a crashed run left behind; returns their names.
pub fn remove_stale(root: &Path) -> Vec<String> {
    job_dirs(root)
        .filter_map(|e| {
            let path = e.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed
                .ok()
                .map(|()| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}
