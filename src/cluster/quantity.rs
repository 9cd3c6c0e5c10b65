//! Whole-number reading of Kubernetes quantities (GPUs are counted, never fractional).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The integer value of a quantity such as `8`, `2k` or `1Ki`; None when it is fractional or malformed.
pub fn as_integer(q: &Quantity) -> Option<i64> {
    let text = q.0.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let base: i64 = number.parse().ok()?;
    let factor: i64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => return None,
    };
    base.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(as_integer(&Quantity("8".into())), Some(8));
        assert_eq!(as_integer(&Quantity("2k".into())), Some(2000));
        assert_eq!(as_integer(&Quantity("1Ki".into())), Some(1024));
        assert_eq!(as_integer(&Quantity("500m".into())), None);
    }
}
