"""jieba's search-mode cut by jieba-rs where the two agree (`chinese.search_cut`):
the words jieba itself gives, on chosen texts, on random mixtures of Chinese,
ASCII and punctuation, and on every MemDaily turn."""

import json
from pathlib import Path

import jieba
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.processors import chinese

MEMDAILY = Path(__file__).parents[3].parent / "shared" / "data" / "memdaily" / "turns.jsonl"

TEXTS = {
    "plain Chinese": "我同事身高164厘米，他上周去了杭州西湖。",
    "a name the dictionary lacks": "亚瑟士这款鞋子真挺不错的，尤其是它的稳定性和支撑性。",
    "ASCII words inside": "我在用Kafka和OPPOReno7手机，还有 RocksDB 。",
    "an e-mail address (jieba's own cut)": "我的同事的邮箱地址是sunzhihong0421@huayinfinance.com。",
    "a hyphenated model (jieba's own cut)": "我穿的运动鞋是亚瑟士Gel-Kayano26。",
    "percent and C++ (jieba's own cut)": "增长了50%，他会C++和R&D。",
    "full-width, emoji, spaces": "ＡＢＣ１２３  你好😀\n\t再见！",
    "English only": "I went to the lake yesterday, didn't I?",
    "empty": "",
}


@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_the_cut_is_jiebas(text):
    assert chinese.search_cut(text) == list(jieba.cut_for_search(text))


def test_jieba_rs_cuts_otherwise_where_jieba_is_asked_itself():
    """The case `_JIEBA_ONLY` routes to jieba: jieba-rs keeps the token whole."""
    text = TEXTS["a hyphenated model (jieba's own cut)"]
    assert chinese._JIEBA_ONLY.search(text)
    assert chinese._rjieba().cut_for_search(text, True) != list(jieba.cut_for_search(text))


PIECES = [
    "我", "同事", "身高", "厘米", "杭州西湖", "亚瑟士", "运动鞋", "中华人民共和国", "的", "了", "论坛", "金融科技",
    "Kafka", "OPPO", "Reno7", "2023", "年", "164", " ", "  ", "\n", "，", "。", ",", ".", "!", "?", "😀", "Ａ", "１",
    "'", "\"", "(", ")", "@", "/", ":", "·", "—", "-", "_", "%", "+", "#", "&", "e.g.", "C++", "x_y", "50%",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_any_mixture_is_cut_as_jieba_cuts_it(text):
    assert chinese.search_cut(text) == list(jieba.cut_for_search(text))


def test_every_memdaily_turn_is_cut_as_jieba_cuts_it():
    if not MEMDAILY.exists():
        pytest.skip(f"MemDaily is not at {MEMDAILY} (../shared/data/memdaily)")
    texts = [json.loads(line)["text"] for line in MEMDAILY.read_text(encoding="utf-8").splitlines() if line.strip()]
    differ = [t for t in texts if chinese.search_cut(t) != list(jieba.cut_for_search(t))]
    assert not differ, f"{len(differ)} of {len(texts)} turns, e.g. {differ[:3]}"
