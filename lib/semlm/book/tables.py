"""How a chapter shows a table or its configuration: :func:`show` (a table as a reader wants it, a meaningful index
kept, a Series as a one-column table instead of text ending ``dtype: ...``) and :func:`show_config` (the few settings
that define a chapter's scale, every setting one click away, in place of a raw dataclass repr); and
:func:`table_cell`, a value as one cell of a generated Markdown table (``VERDICTS.md``).
"""

from __future__ import annotations

import dataclasses
import html
import json

#: Decimal places of a displayed float unless a chapter asks for others.
DECIMALS = 3


def show(frame, decimals: int = DECIMALS):
    """``frame`` (a DataFrame or Series) as a pandas Styler without a ``0..n`` index, floats rounded to
    ``decimals`` places, missing values shown as ``–`` and ``snake_case`` column names as words (``switch rate``)."""
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame(frame.name if frame.name is not None else "value")
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"show() takes a pandas DataFrame or Series, got {type(frame).__name__}")
    # snake_case headers cannot wrap, so they widen a table past the column
    frame = frame.rename(columns=lambda name: name.replace("_", " ") if isinstance(name, str) else name)
    styler = frame.style.format(precision=decimals, na_rep="–")
    return styler.hide(axis="index") if has_default_index(frame) else styler


def has_default_index(frame) -> bool:
    """True when ``frame``'s index is the unnamed ``0..n`` a reader learns nothing from."""
    import pandas as pd

    index = frame.index
    return (isinstance(index, pd.RangeIndex) and index.name is None and index.start == 0 and index.step == 1)


def _value_text(value) -> str:
    if isinstance(value, (tuple, list)):
        return ", ".join(repr(v) if isinstance(v, str) else _value_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def flat_settings(config, prefix: str = "") -> dict[str, object]:
    """Every field of a (nested) dataclass ``config`` as ``{dotted.name: value}``."""
    if not dataclasses.is_dataclass(config):
        raise ValueError(f"expected a configuration dataclass, got {type(config).__name__}")
    out: dict[str, object] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(flat_settings(value, f"{prefix}{field.name}."))
        else:
            out[f"{prefix}{field.name}"] = value
    return out


def _setting(config, dotted: str):
    value = config
    for part in dotted.split("."):
        if not hasattr(value, part):
            choices = ", ".join(flat_settings(config))
            raise ValueError(f"{type(config).__name__} has no setting {dotted!r}; choose from: {choices}")
        value = getattr(value, part)
    return value


def config_table(config, fields):
    """The settings ``fields`` (dotted paths into nested dataclasses, ``"size.n_layer"``) of ``config`` as a
    two-column DataFrame (``setting``, ``value``), values as text so a column of mixed types reads cleanly."""
    import pandas as pd

    return pd.DataFrame({"setting": list(fields), "value": [_value_text(_setting(config, f)) for f in fields]})


@dataclasses.dataclass(frozen=True)
class ConfigSummary:
    """A short settings table with the full configuration behind a ``<details>`` toggle."""

    config: object
    fields: tuple[str, ...]

    def _repr_html_(self) -> str:
        short = config_table(self.config, self.fields).style.hide(axis="index").to_html()
        settings = flat_settings(self.config)
        full = config_table(self.config, tuple(settings)).style.hide(axis="index").to_html()
        name = html.escape(getattr(self.config, "name", "") or type(self.config).__name__)
        return (f'<div class="semlm-config">{short}<details class="semlm-config-full"><summary>'
                f"full configuration ({name}, {len(settings)} settings)</summary>{full}</details></div>")

    def __repr__(self) -> str:
        table = config_table(self.config, self.fields)
        return "\n".join(f"{s}: {v}" for s, v in zip(table["setting"], table["value"]))


def show_config(config, fields) -> ConfigSummary:
    """``config`` as the settings ``fields`` that define its scale, the rest one click away.
    An unknown field fails here, when the chapter runs, with the valid names."""
    fields = tuple(fields)
    config_table(config, fields)
    return ConfigSummary(config, fields)


def table_cell(value) -> str:
    """A value as a Markdown table cell: floats to 4 significant digits, other values as text or JSON."""
    if isinstance(value, float):
        return f"{value:.4g}"
    text = value if isinstance(value, str) else json.dumps(value, default=str) if value is not None else ""
    return text.replace("|", "\\|").replace("\n", " ")
