#pragma once
// Arithmetic over named integer axes: shapes, constraints, flops and bytes in task.toml.
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace d2k {

struct ExprError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ExprVars = std::map<std::string, double, std::less<>>;

// Evaluates `text` over `vars`; throws ExprError naming the position and the reason.
double eval_expr(std::string_view text, const ExprVars& vars);

// Evaluates a shape dimension: must be an integer in [0, 2^40).
long long eval_dim(std::string_view text, const ExprVars& vars);

// True when `name` may be an axis or param name (an identifier that is not a function of the language).
bool is_valid_identifier(std::string_view name);

}  // namespace d2k
