//! Registry settings.

#[cfg(feature = "test-support")]
use serde_json::Value;

use super::{
    DEFAULT_MAX_CONCURRENT_JOBS_PER_OWNER, DEFAULT_MAX_RETAINED_PER_OWNER, MAX_SAFE_INTEGER,
    RegistryConfigError,
};

/// Registry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryConfig {
    max_concurrent_jobs_per_owner: u64,
    max_retained_per_owner: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            max_concurrent_jobs_per_owner: DEFAULT_MAX_CONCURRENT_JOBS_PER_OWNER,
            max_retained_per_owner: DEFAULT_MAX_RETAINED_PER_OWNER,
        }
    }
}

impl RegistryConfig {
    /// Settings with an admission limit of `limit` live jobs per owner.
    ///
    /// # Errors
    ///
    /// When `limit` is zero or above 2^53 - 1.
    pub fn with_max_concurrent_jobs_per_owner(limit: u64) -> Result<Self, RegistryConfigError> {
        if limit == 0 || limit > MAX_SAFE_INTEGER {
            return Err(RegistryConfigError(format!(
                "maxConcurrentJobsPerOwner must be a positive safe integer, got {limit}"
            )));
        }
        Ok(RegistryConfig {
            max_concurrent_jobs_per_owner: limit,
            ..RegistryConfig::default()
        })
    }

    /// These settings, keeping at most `limit` finished jobs per owner (and as
    /// many unowned ones) once their outcome has been seen: older ones are
    /// dropped, with their output, oldest first, and their ids become unknown.
    ///
    /// # Errors
    ///
    /// When `limit` is zero or above 2^53 - 1.
    pub fn with_max_retained_per_owner(mut self, limit: u64) -> Result<Self, RegistryConfigError> {
        if limit == 0 || limit > MAX_SAFE_INTEGER {
            return Err(RegistryConfigError(format!(
                "maxRetainedJobsPerOwner must be a positive safe integer, got {limit}"
            )));
        }
        self.max_retained_per_owner = limit;
        Ok(self)
    }

    /// How many finished, seen jobs are kept per owner.
    pub fn max_retained_per_owner(&self) -> u64 {
        self.max_retained_per_owner
    }

    #[cfg(feature = "test-support")]
    /// Settings from a JSON object such as `{"maxConcurrentJobsPerOwner": 4}`.
    ///
    /// # Errors
    ///
    /// For anything but an object with known keys and valid values.
    pub fn from_json(value: &Value) -> Result<Self, RegistryConfigError> {
        let Some(map) = value.as_object() else {
            return Err(RegistryConfigError(format!(
                "config must be a JSON object, got {value}"
            )));
        };
        let mut config = RegistryConfig::default();
        for (key, v) in map {
            match key.as_str() {
                "maxConcurrentJobsPerOwner" => {
                    let limit = v.as_u64().ok_or_else(|| {
                        RegistryConfigError(format!(
                            "maxConcurrentJobsPerOwner must be a positive safe integer, got {v}"
                        ))
                    })?;
                    config = RegistryConfig::with_max_concurrent_jobs_per_owner(limit)?;
                }
                other => {
                    return Err(RegistryConfigError(format!(
                        "unknown config key \"{other}\" (known: maxConcurrentJobsPerOwner)"
                    )));
                }
            }
        }
        Ok(config)
    }

    /// The admission limit.
    pub fn max_concurrent_jobs_per_owner(&self) -> u64 {
        self.max_concurrent_jobs_per_owner
    }
}
