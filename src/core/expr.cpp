#include "core/expr.hpp"

#include <muParser.h>

#include <array>
#include <cmath>
#include <fmt/format.h>

namespace d2k {
namespace {

constexpr std::size_t kMaxExprLength = 1000;
constexpr double kMaxDim = 1099511627776.0;  // 2^40

double cdiv(double a, double b) {
  if (b == 0) throw mu::ParserError("cdiv by zero");
  return std::ceil(a / b);
}
double fdiv(double a, double b) {
  if (b == 0) throw mu::ParserError("fdiv by zero");
  return std::floor(a / b);
}
double mod(double a, double b) {
  if (b == 0) throw mu::ParserError("mod by zero");
  return std::fmod(a, b);
}

constexpr std::array<std::string_view, 30> kReserved{
    "cdiv", "fdiv", "mod",  "min",  "max",  "sum", "avg", "log2", "log10", "log", "ln",
    "exp",  "sqrt", "sign", "rint", "abs",  "sin", "cos", "tan",  "asin",  "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "_pi", "_e"};

}  // namespace

bool is_valid_identifier(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  for (auto r : kReserved)
    if (r == name) return false;
  return true;
}

double eval_expr(std::string_view text, const ExprVars& vars) {
  if (text.size() > kMaxExprLength)
    throw ExprError(fmt::format("expression longer than {} characters", kMaxExprLength));
  if (text.find_first_not_of(" \t") == std::string_view::npos) throw ExprError("empty expression");
  // muparser binds variables by address; keep copies alive for the evaluation.
  std::map<std::string, double, std::less<>> storage(vars.begin(), vars.end());
  try {
    mu::Parser p;
    p.DefineFun("cdiv", cdiv);
    p.DefineFun("fdiv", fdiv);
    p.DefineFun("mod", mod);
    for (auto& [name, value] : storage) p.DefineVar(name, &value);
    p.SetExpr(std::string(text));
    double v = p.Eval();
    if (!std::isfinite(v)) throw ExprError("evaluates to a non-finite number");
    return v;
  } catch (const mu::Parser::exception_type& e) {
    throw ExprError(fmt::format("'{}': {}", text, e.GetMsg()));
  }
}

long long eval_dim(std::string_view text, const ExprVars& vars) {
  double v = eval_expr(text, vars);
  if (v < 0) throw ExprError(fmt::format("'{}' is negative ({})", text, v));
  if (v >= kMaxDim) throw ExprError(fmt::format("'{}' is too large ({} >= 2^40)", text, v));
  if (v != std::floor(v)) throw ExprError(fmt::format("'{}' is not an integer ({})", text, v));
  return static_cast<long long>(v);
}

}  // namespace d2k
